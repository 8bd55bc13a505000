"""Observation of the host's own model calls.

Goal evaluation, memory extraction, title generation and summarization call a model
outside the agent's model-call chain, so middleware never sees them. These types carry
a snapshot of such a call to observers, which cannot change it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._normalize import as_tuple, frozen_mapping

if TYPE_CHECKING:
    from .data import ExtensionData

__all__ = [
    "SystemModelCallObserver",
    "SystemModelRequest",
    "SystemModelResult",
    "SystemOperationKind",
]


class SystemOperationKind(enum.StrEnum):
    """Which host operation made the call."""

    GOAL = "goal"
    MEMORY = "memory"
    TITLE = "title"
    SUMMARIZATION = "summarization"


@dataclass(frozen=True, slots=True)
class SystemModelRequest:
    """What the host sent, taken before the call.

    ``messages`` is always a tuple after construction. Goal and memory pass a message
    list while title and summarization pass one prompt string; a bare ``str`` becomes a
    one-item tuple (otherwise an observer iterating it would walk characters), any other
    sequence is copied (so the caller's live list cannot change the snapshot), and any
    other value is one item: ``SystemModelRequest(messages=None).messages == (None,)``,
    exactly as DeerFlow's contract normalises it. ``invoke_config`` is a read-only copy
    of the run config's top level (its values are the host's live objects).
    """

    messages: Sequence[Any] = ()
    model_name: str | None = None
    invoke_config: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", as_tuple(self.messages))
        if self.invoke_config is not None:
            object.__setattr__(self, "invoke_config", frozen_mapping(self.invoke_config, deep=False))


@dataclass(frozen=True, slots=True)
class SystemModelResult:
    """What came back, taken after the call.

    ``error`` is set when the call raised; for a cancelled call it is the
    ``CancelledError``, and the host re-raises it after submitting the observation.
    """

    response: Any = None
    error: BaseException | None = None
    duration_ms: float | None = None


@runtime_checkable
class SystemModelCallObserver(Protocol):
    """Receives every host-owned model call on every terminal path.

    Success and failure are awaited inline, on the run's path, so keep this cheap;
    cancellation is submitted without waiting.
    """

    async def on_system_model_call(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        kind: SystemOperationKind,
        request: SystemModelRequest,
        result: SystemModelResult,
    ) -> None:
        return None
