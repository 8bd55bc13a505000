"""Reading durable batch results, read-only, as the calling user.

An action calls ``ActionContext.batch_results()`` only when it needs the reader: binding
is lazy so actions that never read batches do not need the permission to. What a reader
returns are detached dictionaries; what the user cannot see is simply absent.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BATCH_RESULTS_RESOLVER_KEY",
    "BatchResultError",
    "BatchResultReader",
    "require_batch_results",
    "resolve_batch_results",
]

BATCH_RESULTS_RESOLVER_KEY = "deerflow_extension_batch_results_resolver"


class BatchResultError(Exception):
    """Admission or availability failure with the HTTP status an action may keep."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


_UNSUPPORTED = "this host does not read batch results"


@runtime_checkable
class BatchResultReader(Protocol):
    """A reader bound to one principal: no user override, no writes.

    The defaults raise ``NotImplementedError``.
    """

    async def list_batches(self, *, thread_id: str, limit: int = 20) -> list[dict[str, Any]]:
        raise NotImplementedError(_UNSUPPORTED)

    async def list_items(
        self, *, thread_id: str, batch_id: str, offset: int = 0, limit: int = 50
    ) -> list[dict[str, Any]] | None:
        raise NotImplementedError(_UNSUPPORTED)

    async def read_item(self, *, thread_id: str, batch_id: str, position: int) -> dict[str, Any] | None:
        """One item's saved report, verdict and evidence, with a ``revision`` over all three."""
        raise NotImplementedError(_UNSUPPORTED)


def resolve_batch_results(request: object) -> BatchResultReader | None:
    """The reader for the request's caller, ``None`` on a host without one. A refused
    caller gets :class:`BatchResultError`; other resolver failures propagate."""
    state = getattr(getattr(request, "app", None), "state", None)
    resolver = getattr(state, BATCH_RESULTS_RESOLVER_KEY, None)
    if not callable(resolver):
        return None
    reader: BatchResultReader | None = resolver(request)
    return reader


def require_batch_results(request: object) -> BatchResultReader:
    """:func:`resolve_batch_results`, with a 503 :class:`BatchResultError` instead of ``None``."""
    reader = resolve_batch_results(request)
    if reader is None:
        raise BatchResultError(503, "Durable batch storage is unavailable")
    return reader
