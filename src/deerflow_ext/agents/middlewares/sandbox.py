"""Sandbox lease for the duration of an agent invocation."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.runtime import Runtime

from deerflow_ext.subagents.sandbox import SandboxLease, SandboxPool, sandbox_pool

from ..context import context_value
from .state import HostState

__all__ = ["SandboxLeaseMiddleware"]


class SandboxLeaseMiddleware(AgentMiddleware[HostState, Any]):
    """Holds a sandbox lease while the agent runs.

    A subagent executor acquires its lease itself (its ``on_task_stop`` must follow the
    release, which no middleware hook can guarantee on failure) and passes it on the
    runtime context; this middleware then only checks it is still held. A lead run gets its
    lease here, keyed by run id, and returns it in ``after_agent``; acquiring is idempotent
    per owner, so goal continuations re-entering the agent reuse the same lease.
    """

    state_schema = HostState

    def __init__(self, pool: SandboxPool | None = None) -> None:
        super().__init__()
        self.pool = pool if pool is not None else sandbox_pool

    def _owner(self, runtime: Runtime[Any]) -> str | None:
        if isinstance(context_value(runtime, "sandbox_lease"), SandboxLease):
            return None  # owned by the executor
        run_id = context_value(runtime, "run_id")
        return f"run:{run_id}" if run_id else None

    def before_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        owner = self._owner(runtime)
        if owner is not None:
            self.pool.acquire(owner)
        return None

    def after_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        owner = self._owner(runtime)
        if owner is not None:
            self.pool.release(self.pool.acquire(owner))
        return None

    async def abefore_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    async def aafter_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)
