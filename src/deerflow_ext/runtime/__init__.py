"""Run execution: admission and the finalizing barrier, the lead-run worker, the stream bridge."""

from .coordinator import LocalThreadCoordinator, ThreadCoordinator, advisory_key
from .handle import RunHandle, RunPhase
from .manager import MultitaskStrategy, RunManager, RunsClosedError, ThreadBusyError
from .pg_coordinator import PostgresThreadCoordinator
from .stream import END_EVENT, MemoryStreamBridge, RunStreamWriter, StreamBridge, StreamEvent
from .worker import CompletionHook, LeadRunner, LeadRunSpec, RunCompletion, RunWorkerDeps, execute_lead_run

__all__ = [
    "END_EVENT",
    "CompletionHook",
    "LeadRunSpec",
    "LeadRunner",
    "LocalThreadCoordinator",
    "MemoryStreamBridge",
    "MultitaskStrategy",
    "PostgresThreadCoordinator",
    "RunCompletion",
    "RunHandle",
    "RunManager",
    "RunPhase",
    "RunStreamWriter",
    "RunWorkerDeps",
    "RunsClosedError",
    "StreamBridge",
    "StreamEvent",
    "ThreadBusyError",
    "ThreadCoordinator",
    "advisory_key",
    "execute_lead_run",
]
