"""Run execution: admission and the finalizing barrier, the lead-run worker, the stream bridge."""

from .coordinator import LocalThreadCoordinator, ThreadCoordinator, advisory_key
from .handle import RunHandle, RunPhase
from .manager import RunManager, RunsClosedError
from .pg_coordinator import PostgresThreadCoordinator
from .stream import END_EVENT, RunStream, StreamEvent
from .worker import CompletionHook, LeadRunner, LeadRunSpec, RunCompletion, RunWorkerDeps, execute_lead_run

__all__ = [
    "END_EVENT",
    "CompletionHook",
    "LeadRunSpec",
    "LeadRunner",
    "LocalThreadCoordinator",
    "PostgresThreadCoordinator",
    "RunCompletion",
    "RunHandle",
    "RunManager",
    "RunPhase",
    "RunStream",
    "RunWorkerDeps",
    "RunsClosedError",
    "StreamEvent",
    "ThreadCoordinator",
    "advisory_key",
    "execute_lead_run",
]
