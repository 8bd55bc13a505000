"""One run as the runtime tracks it while it is in flight."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .stream import RunStreamWriter

__all__ = ["RunHandle", "RunPhase"]


class RunPhase(enum.Enum):
    CREATED = "created"  # its task has not run yet: cancelling it would skip the worker whole
    QUEUED = "queued"  # waiting to hold its thread
    ADMITTING = "admitting"  # holds the thread, being marked started (run running, thread busy)
    RUNNING = "running"  # admitted and marked started: it gets both lifecycle hooks
    FINALIZING = "finalizing"  # persisting and notifying; an interrupt no longer applies
    DONE = "done"


@dataclass(eq=False)
class RunHandle:
    """Mutable in-flight state of one run; the persisted row is the durable record.

    ``extensions`` is the snapshot resolved once when the run was created: the worker uses
    this same object for the task store, both notifications and the agent.
    """

    run_id: str
    thread_id: str
    extensions: Any
    stream: RunStreamWriter
    phase: RunPhase = RunPhase.CREATED
    interrupted: bool = False
    # Set with an interrupt whose state must be undone (multitask "rollback", cancel
    # action "rollback"): the thread's checkpoints go back to before this run.
    rollback: bool = False
    # The persisted creation time: other processes compare it to decide which run a
    # follow-up interrupts (see ``signals``).
    created_at: datetime | None = None
    # When it went running; set only for a run with a webhook (its payload's run_started_at).
    started_at: datetime | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    finished: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    # A successful run's final state values, set once it is persisted (before ``finished``):
    # ``/wait`` answers with them instead of reading the thread back. None otherwise.
    final_values: Mapping[str, Any] | None = field(default=None, repr=False)
    # The principal that asked for the run (``ExtensionPrincipal.user_id``): its row's owner,
    # its ``TaskInfo.user_id``, the scope its evidence is read under.
    user_id: str = "default"

    def interrupt(self, *, rollback: bool = False) -> bool:
        """Stop the run unless it is already finalizing; True when the stop was accepted.

        A finalizing run is left alone on purpose: its ``on_task_stop`` is running under the
        barrier and a follow-up is already waiting for it, so cancelling would only cut the
        extension's bookkeeping short. A second interrupt is a no-op for the same reason:
        with scale-out the same stop can arrive twice (locally and as a signal from another
        process), and a second ``Task.cancel()`` would cut finalization short.

        Two phases are not cancelled but *marked*, and the worker honours the mark at its next
        checkpoint: ``CREATED``, because a task cancelled before its first step never runs
        the worker at all (the row would stay ``pending``, the stream open); and
        ``ADMITTING``, because a cancel inside "mark started" used to leave a run recorded
        as never started, with ``started_at`` set, no hooks and its thread ``busy`` for good.
        Marked there, the run either never started or started and is aborted right after
        ``on_task_start``: the spec's "marked started gets both hooks" holds.
        """
        if self.phase in (RunPhase.FINALIZING, RunPhase.DONE) or self.task is None:
            return False
        self.rollback = self.rollback or rollback
        if self.interrupted:
            return False
        self.interrupted = True
        if self.phase not in (RunPhase.CREATED, RunPhase.ADMITTING):
            self.task.cancel()
        return True

    async def wait(self) -> None:
        await self.finished.wait()
