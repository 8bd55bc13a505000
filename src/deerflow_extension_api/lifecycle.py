"""Task start and stop notifications.

A task is one lead run or one subagent execution. The pair of hooks brackets it with
the same ``task_store`` the task's middleware sees, which makes them the natural place
to set up and fold up per-task state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .data import ExtensionData

__all__ = ["TaskInfo", "TaskLifecycleContributor", "TaskOutcome"]


class TaskOutcome(enum.StrEnum):
    """How a task ended, mapped conservatively.

    A ``StrEnum`` so an outcome can be logged, stored or compared with its plain string
    value. A subagent that hit its token or turn budget can still be ``completed``.
    """

    COMPLETED = "completed"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """Identity of a task.

    ``task_id`` is the task's identity; for a subagent the task store's ``scope_id``
    may be the delegating tool-call id instead, so do not use the store for identity.
    ``thread_id`` is ``""`` for a subagent that runs without a thread (direct factory
    calls), as in DeerFlow: always a string, so it can be logged and stored as one.
    ``user_id`` is whose task it is (the run's owner, ``ExtensionPrincipal.user_id``), or
    ``None`` where the host records none: an addition of this host, keyword-only so
    DeerFlow's positional constructions stay valid.
    """

    task_id: str
    run_id: str
    thread_id: str
    kind: Literal["lead", "subagent"]
    parent_task_id: str | None = None
    agent_name: str | None = None
    resumed: bool = False
    user_id: str | None = field(default=None, kw_only=True)


@runtime_checkable
class TaskLifecycleContributor(Protocol):
    """Receives ``on_task_start`` / ``on_task_stop`` for every task.

    Both hooks share one 3-second notification budget with every other contributor,
    so keep them to bookkeeping. ``on_task_stop`` must tolerate missing state: its
    ``on_task_start`` may have been skipped when an earlier contributor spent the budget.
    The default bodies let a contributor implement only the hook it needs, and let a
    later release add hooks without breaking existing contributors.
    """

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        return None

    async def on_task_stop(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        info: TaskInfo,
        outcome: TaskOutcome,
    ) -> None:
        return None
