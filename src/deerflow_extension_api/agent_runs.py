"""Starting and steering full agent runs from a plugin, as the calling user.

A backend action gets an :class:`AgentRuns` handle on ``ActionContext.agent_runs`` (and a
middleware or tool finds the host's under :data:`AGENT_RUNS_CONTEXT_KEY` on the runtime
context). The handle is bound by the host to one user and re-checks that user's
permissions and ownership on every call; it lives in this process only and is not a
credential to store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AGENT_RUNS_CONTEXT_KEY",
    "AGENT_RUNS_RESOLVER_KEY",
    "AgentRun",
    "AgentRunError",
    "AgentRuns",
    "require_agent_runs",
    "resolve_agent_runs",
]

AGENT_RUNS_RESOLVER_KEY = "deerflow_agent_runs_resolver"
AGENT_RUNS_CONTEXT_KEY = "__deerflow_extension_agent_runs"


class AgentRunError(Exception):
    """The host refused an operation; ``status_code`` is its HTTP equivalent
    (400, 403, 404, 409, 422 or 503), which an action may pass on."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True, slots=True)
class AgentRun:
    """A run as the handle reports it."""

    thread_id: str
    run_id: str
    status: str
    assistant_id: str | None = None
    stop_reason: str | None = None


_UNSUPPORTED = "this host does not control agent runs"


@runtime_checkable
class AgentRuns(Protocol):
    """Agent-run control bound to one user; the defaults raise ``NotImplementedError``."""

    async def create_thread(
        self,
        *,
        assistant_id: str = "lead_agent",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Create a thread the user owns (or return ``thread_id`` when it is already theirs)."""
        raise NotImplementedError(_UNSUPPORTED)

    async def start(
        self,
        *,
        thread_id: str,
        input: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> AgentRun:
        """Start a run through ordinary admission. An active run is a conflict (never
        cancelled implicitly); retry an uncertain start with a namespaced idempotency key."""
        raise NotImplementedError(_UNSUPPORTED)

    async def resume(self, *, thread_id: str, resume: Any, idempotency_key: str | None = None) -> AgentRun:
        """Answer an interrupt explicitly; nothing is ever approved on the user's behalf."""
        raise NotImplementedError(_UNSUPPORTED)

    async def get(self, *, thread_id: str, run_id: str) -> AgentRun:
        """The run's current status, from any Gateway process."""
        raise NotImplementedError(_UNSUPPORTED)

    async def get_state(self, *, thread_id: str) -> dict[str, Any]:
        """The thread's latest state (not one run's result)."""
        raise NotImplementedError(_UNSUPPORTED)

    async def wait(self, *, thread_id: str, run_id: str, timeout: float = 60) -> AgentRun:  # noqa: ASYNC109 (DeerFlow's signature)
        """Wait for a terminal or interrupted status, else ``TimeoutError``; giving up
        waiting never cancels the run."""
        raise NotImplementedError(_UNSUPPORTED)

    async def cancel(self, *, thread_id: str, run_id: str) -> None:
        """Ask the run to stop; its checkpoints stay."""
        raise NotImplementedError(_UNSUPPORTED)


def resolve_agent_runs(request: object) -> AgentRuns | None:
    """The handle for the request's authenticated caller, or ``None`` on a host (or for a
    credential) without one. An authentication failure raises ``PermissionError``."""
    state = getattr(getattr(request, "app", None), "state", None)
    resolver = getattr(state, AGENT_RUNS_RESOLVER_KEY, None)
    if not callable(resolver):
        return None
    runs: AgentRuns | None = resolver(request)
    return runs


def require_agent_runs(request: object) -> AgentRuns:
    """:func:`resolve_agent_runs`, with ``NotImplementedError`` instead of ``None``."""
    runs = resolve_agent_runs(request)
    if runs is None:
        raise NotImplementedError("host-bound Agent run control is unavailable")
    return runs
