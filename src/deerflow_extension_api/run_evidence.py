"""Read-only evidence of agent runs: which runs changed, their status, their events.

A service gets a reader bound to everything it may see (``ExtensionRuntimeDeps``); a
user-facing route asks for one bound to the request's caller with
:func:`resolve_run_evidence_reader`, never by passing a user id itself. Readers page:
a cursor over changed runs, a sequence number over one run's events. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "RUN_EVIDENCE_READER_RESOLVER_KEY",
    "InvalidRunEvidenceCursor",
    "RunEventPage",
    "RunEventView",
    "RunEvidenceReader",
    "RunPage",
    "RunStatusView",
    "require_run_evidence_reader",
    "resolve_run_evidence_reader",
]

RUN_EVIDENCE_READER_RESOLVER_KEY = "deerflow_extension_run_evidence_reader_resolver"


class InvalidRunEvidenceCursor(ValueError):
    """A cursor that is malformed, of another version, or issued to another scope."""


@dataclass(frozen=True, slots=True)
class RunStatusView:
    """One visible run's lifecycle as the host records it (timestamps ISO 8601)."""

    thread_id: str = ""
    run_id: str = ""
    status: str = ""
    created_at: str = ""
    updated_at: str = ""
    error: str | None = None
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class RunEventView:
    """One persisted event; ``seq`` grows within the thread. Content is a detached copy."""

    thread_id: str = ""
    run_id: str = ""
    seq: int = 0
    event_type: str = ""
    category: str = ""
    content: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of changed runs and the cursor that continues after it."""

    items: tuple[RunStatusView, ...] = ()
    next_cursor: str | None = None
    has_more: bool = False


@dataclass(frozen=True, slots=True)
class RunEventPage:
    """A forward page of one run's events and the ``seq`` to continue after."""

    items: tuple[RunEventView, ...] = ()
    next_after_seq: int | None = None
    has_more: bool = False


@runtime_checkable
class RunEvidenceReader(Protocol):
    """The host's reader; the defaults say this host cannot do it (``NotImplementedError``)."""

    async def list_changed_runs(self, *, cursor: str | None, limit: int) -> RunPage:
        """Visible runs changed after ``cursor``, in a stable order.

        Store ``next_cursor`` only once your own output is durable: reusing a cursor is
        valid and may replay runs. An empty page means caught up. Deleted runs leave no
        tombstone; treat ``get_run_status(...) is None`` as gone.
        """
        raise NotImplementedError("this host does not list changed runs")

    async def list_run_events(self, *, thread_id: str, run_id: str, after_seq: int | None, limit: int) -> RunEventPage:
        """Events with ``seq > after_seq``; an unknown or invisible run gives an empty page,
        so a reader cannot probe for ids outside its scope."""
        raise NotImplementedError("this host does not read run events")

    async def get_run_status(self, *, thread_id: str, run_id: str) -> RunStatusView | None:
        """The run's status, or ``None`` when it is not visible to this reader."""
        raise NotImplementedError("this host does not read run status")


def resolve_run_evidence_reader(request: object) -> RunEvidenceReader | None:
    """A reader bound to the request's caller, or ``None`` on a host without one.

    A caller the host refuses gets ``PermissionError``; any other failure of the host's
    resolver propagates (it is not a reason to fall back to a wider reader).
    """
    state = getattr(getattr(request, "app", None), "state", None)
    resolver = getattr(state, RUN_EVIDENCE_READER_RESOLVER_KEY, None)
    if not callable(resolver):
        return None
    reader: RunEvidenceReader | None = resolver(request)
    return reader


def require_run_evidence_reader(request: object) -> RunEvidenceReader:
    """:func:`resolve_run_evidence_reader`, with ``NotImplementedError`` instead of ``None``
    (a route maps it to 503). It never falls back to the service-wide reader."""
    reader = resolve_run_evidence_reader(request)
    if reader is None:
        raise NotImplementedError("request-scoped run evidence is unavailable")
    return reader
