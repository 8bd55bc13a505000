"""The task-lifecycle bracket: ``on_task_start``, the task, its outcome, ``on_task_stop``.

Three places run a task whose hooks bracket it — the Gateway's run worker, the embedded
``DeerFlowClient`` and the subagent executor — and they must agree on the rule (docs/SPEC.md,
"Task lifecycle"): ``on_task_start`` is awaited before the task's first step,
``on_task_stop`` runs once the start was attempted, whatever the outcome, after everything
the caller put inside the bracket (persistence, the sandbox lease's release), and the outcome is ``completed`` unless
the task said otherwise, ``aborted`` when it was cancelled and ``failed`` when it raised.
The two notifications are :func:`notify_task_start` and :func:`notify_task_stop`: each one
budget of its own, delivered on the notification loop (``notification_loop.py``) under the
rules of ``notify.py``. A process exit an extension raised from either hook is contained here
(``extensions/boundary/exits.py``: an extension cannot stop the host); a failure of the host's own
notification machinery at stop time is logged, never put in place of the task's outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

from ..boundary.exits import PROCESS_EXITS, contain_exit
from ..contract.snapshot import Contribution, LoadedExtensions
from .notification_loop import notification_loop
from .notify_plans import _notify_each

__all__ = ["TaskBracket", "notify_task_start", "notify_task_stop", "task_bracket"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class TaskBracket:
    """One task's bracket, as its body sees it.

    The body awaits :meth:`start` where ``on_task_start`` belongs in its own error handling
    (first, before the task's first step); ``on_task_stop`` then follows when the bracket
    exits, even when the start itself was cancelled. The body sets :attr:`outcome` once it
    knows it (a run the worker caught and persisted as failed, say); left ``None``, the
    outcome is read from how the body ended.
    """

    ext: LoadedExtensions
    task_store: ExtensionData | None
    info: TaskInfo
    where: str
    budget: float | None = None
    outcome: TaskOutcome | None = None
    _started: bool = field(default=False, init=False)

    async def start(self) -> None:
        """Await ``on_task_start`` (nothing when there is no task store to notify)."""
        if self.task_store is None or self._started:
            return
        self._started = True
        try:
            await notify_task_start(self.ext, self.task_store, self.info, budget=self.budget)
        except PROCESS_EXITS as exc:  # an extension's: fail open, like any hook failure
            contain_exit(exc, where=self.where)

    async def stop(self, ended: TaskOutcome) -> None:
        """Await ``on_task_stop`` once, with the declared outcome, else ``ended``."""
        if self.task_store is None or not self._started:
            return
        self._started = False
        try:
            await notify_task_stop(self.ext, self.task_store, self.info, self.outcome or ended, budget=self.budget)
        except asyncio.CancelledError:
            raise
        except PROCESS_EXITS as exc:  # an extension's; the task has already ended
            contain_exit(exc, where=self.where)
        except Exception:  # notify contains contributor failures; this is the host's own
            logger.exception("%s: on_task_stop notification failed", self.where)


@asynccontextmanager
async def task_bracket(
    ext: LoadedExtensions,
    task_store: ExtensionData | None,
    info: TaskInfo,
    *,
    where: str,
    budget: float | None = None,
) -> AsyncIterator[TaskBracket]:
    """A :class:`TaskBracket` whose ``on_task_stop`` runs when the ``async with`` exits.

    ``task_store`` is ``None`` when nothing is to be notified (no lifecycle contributor, or a
    subagent without a parent run); the body still runs. ``where`` names the task in the
    line of a contained process exit ("run <id>", "subagent <id>").
    """
    bracket = TaskBracket(ext, task_store, info, where=where, budget=budget)
    ended = TaskOutcome.FAILED  # how the body ended, when it declared no outcome itself
    try:
        yield bracket
        ended = TaskOutcome.COMPLETED
    except asyncio.CancelledError:
        ended = TaskOutcome.ABORTED
        raise
    finally:
        await bracket.stop(ended)


async def _dispatch(
    contributions: Sequence[Contribution[Any]],
    method: str,
    args: tuple[Any, ...],
    task_id: str,
    budget: float | None,
) -> None:
    target = notification_loop.loop
    if target is None or target is asyncio.get_running_loop():
        await _notify_each(contributions, method, args, task_id=task_id, budget=budget)
    else:
        await notification_loop.run(lambda: _notify_each(contributions, method, args, task_id=task_id, budget=budget))


async def notify_task_start(
    ext: LoadedExtensions, task_store: ExtensionData, info: TaskInfo, *, budget: float | None = None
) -> None:
    """Await every ``on_task_start`` on the notification loop within one budget."""
    contributions = ext.task_lifecycle
    if not contributions:
        return
    await _dispatch(contributions, "on_task_start", (ext.app_store, task_store, info), info.task_id, budget)


async def notify_task_stop(
    ext: LoadedExtensions,
    task_store: ExtensionData,
    info: TaskInfo,
    outcome: TaskOutcome,
    *,
    budget: float | None = None,
) -> None:
    """Await every ``on_task_stop``, with a budget of its own (separate from the start's)."""
    contributions = ext.task_lifecycle
    if not contributions:
        return
    await _dispatch(contributions, "on_task_stop", (ext.app_store, task_store, info, outcome), info.task_id, budget)
