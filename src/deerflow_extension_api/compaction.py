"""Context-compaction events.

After summarization nothing in state records which messages became the summary. The
host captures that mapping at the only moment it exists and reports it here, with
content hashed by :func:`deerflow_extension_api.canonical_hash` of each message's
content (never its ``str()``), so an extension can match messages it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._normalize import as_tuple

if TYPE_CHECKING:
    from .data import ExtensionData

__all__ = ["CompactionEvent", "ContextCompactionObserver"]


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """Which messages were folded into which summary.

    The hash fields are copied into tuples at construction, like
    ``SystemModelRequest.messages``, so the event cannot change after it is emitted.
    ``emitted_at`` is a ``time.time()`` timestamp.
    """

    transform_kind: str
    transform_version: str
    source_content_hashes: tuple[str, ...]
    output_content_hash: str
    compacted_message_count: int
    kept_message_count: int
    kept_content_hashes: tuple[str, ...] = ()
    task_id: str | None = None
    run_id: str | None = None
    thread_id: str | None = None
    emitted_at: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "source_content_hashes", as_tuple(self.source_content_hashes))
        object.__setattr__(self, "kept_content_hashes", as_tuple(self.kept_content_hashes))


@runtime_checkable
class ContextCompactionObserver(Protocol):
    """Receives every compaction, fire-and-forget, outside the model turn.

    ``task_store`` is always a detached store (``scope_id == "detached"``): keep
    anything that must outlive the call in ``app_store``.
    """

    async def on_context_compacted(
        self, app_store: ExtensionData, task_store: ExtensionData, event: CompactionEvent
    ) -> None:
        return None
