"""``RunManager``: creates runs, admits follow-ups, cancels, and drains at shutdown.

A follow-up run on a busy thread interrupts the run in progress (and any run still waiting
for the thread): the newest request is what the user wants answered. The interrupted run
still finalizes — persistence, ``on_task_stop`` — before the follow-up's lifecycle starts,
because the follow-up waits for the thread hold (see ``coordinator``).

That is the ``interrupt`` multitask strategy, the default. LangGraph Platform's other
strategies map onto the same per-thread rules (:class:`MultitaskStrategy`): ``reject``
refuses a run while the thread has one pending or running (:class:`ThreadBusyError`);
``rollback`` interrupts like ``interrupt`` and then restores the thread's state to before
the interrupted run (its record stays, ``interrupted``: the extensions saw it run);
``enqueue`` interrupts nothing — the run waits for the thread hold, behind the runs already
there.

With several Gateway processes (PostgreSQL), ``signals`` carries the same two requests to
the other processes: a follow-up tells every process to interrupt its older runs on the
thread, and a cancel for a run this process does not know is published for its owner.
Both are also written to the runs' rows first (``cancel_requested``): a signal can be lost
while a listener reconnects, so every ``backstop_interval`` seconds — and at once after a
reconnect — a process with runs in flight reads their rows and applies what it missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..background_task import stop_task
from ..extensions.contract.snapshot import LoadedExtensions
from ..persistence.models import DEFAULT_USER_ID, RunStatus
from ..persistence.records import PROCESS_OWNER, HostStore
from .coordinator import LocalThreadCoordinator, ThreadCoordinator
from .handle import RunHandle, RunPhase
from .signals import RunSignals
from .stream import MemoryStreamBridge, StreamBridge
from .worker import CompletionHook, LeadRunner, LeadRunSpec, RunWorkerDeps, execute_lead_run

__all__ = ["MultitaskStrategy", "RunManager", "RunsClosedError", "ThreadBusyError"]

logger = logging.getLogger("deerflow_ext.runtime")


class RunsClosedError(RuntimeError):
    """The Gateway is shutting down and admits no new runs."""


class ThreadBusyError(RuntimeError):
    """A ``reject`` run was refused: the thread has a run pending or running."""


class MultitaskStrategy(enum.StrEnum):
    """What a new run does to the runs already on its thread (see the module docstring)."""

    REJECT = "reject"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"
    ENQUEUE = "enqueue"


class RunManager:
    """In-flight runs of this process.

    ``extensions`` returns the snapshot a new run resolves (once, at creation); it is the
    owning app's, passed in, never the process-wide set, so two apps' runs stay apart.
    """

    def __init__(
        self,
        *,
        store: HostStore,
        agent_host: LeadRunner,
        extensions: Callable[[], LoadedExtensions],
        coordinator: ThreadCoordinator | None = None,
        owner: str = PROCESS_OWNER,
        notify_budget: float | None = None,
        completion_hooks: Sequence[CompletionHook] = (),
        signals: RunSignals | None = None,
        streams: StreamBridge | None = None,
        backstop_interval: float = 2.0,
        journal: bool | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self._extensions = extensions
        self._deps = RunWorkerDeps(
            store=store,
            coordinator=coordinator or LocalThreadCoordinator(),
            agent_host=agent_host,
            notify_budget=notify_budget,
            completion_hooks=tuple(completion_hooks),
            journal=journal,
        )
        self._runs: dict[str, RunHandle] = {}
        self._closed = False
        self._signals = signals
        self.streams: StreamBridge = streams if streams is not None else MemoryStreamBridge()
        self._background: set[asyncio.Task[Any]] = set()
        self._backstop_interval = backstop_interval
        self._backstop: asyncio.Task[None] | None = None
        self._recheck = asyncio.Event()

    @property
    def coordinator(self) -> ThreadCoordinator:
        return self._deps.coordinator

    @property
    def in_flight(self) -> tuple[RunHandle, ...]:
        return tuple(self._runs.values())

    def get(self, run_id: str) -> RunHandle | None:
        return self._runs.get(run_id)

    def active_on(self, thread_id: str) -> tuple[RunHandle, ...]:
        return tuple(h for h in self._runs.values() if h.thread_id == thread_id and h.phase is not RunPhase.DONE)

    async def start(
        self,
        thread_id: str,
        *,
        messages: Sequence[Mapping[str, Any]] = (),
        goal: str | None = None,
        context: Mapping[str, Any] | None = None,
        run_input: Mapping[str, Any] | None = None,
        spec: LeadRunSpec | None = None,
        multitask_strategy: MultitaskStrategy = MultitaskStrategy.INTERRUPT,
        thread_defaults: Mapping[str, Any] | None = None,
        user_id: str = DEFAULT_USER_ID,
    ) -> RunHandle:
        """Persist a pending run, apply the multitask strategy, start the worker.

        ``spec`` carries every run option; without it one is made from ``messages``,
        ``goal`` and ``context``. ``thread_defaults`` are metadata keys the thread gets
        with the run's row unless it has them. A missing thread raises
        ``ThreadNotFoundError`` before anything is written. ``user_id`` is the principal
        the run is recorded for (its owner: what run evidence readers are scoped to).
        """
        if self._closed:
            raise RunsClosedError("the Gateway is shutting down; no new runs are accepted")
        if spec is None:
            spec = LeadRunSpec(tuple(dict(m) for m in messages), goal, dict(context or {}))
        strategy = MultitaskStrategy(multitask_strategy)
        if strategy is MultitaskStrategy.REJECT and (
            self.active_on(thread_id) or await self.store.has_live_run(thread_id)
        ):
            raise ThreadBusyError(
                f"thread {thread_id} already has a run pending or running (multitask_strategy is reject)"
            )
        run_id = str(uuid.uuid4())
        stored_input = dict(run_input) if run_input is not None else {"messages": [*spec.messages], "goal": spec.goal}
        interrupting = strategy in (MultitaskStrategy.INTERRUPT, MultitaskStrategy.ROLLBACK)
        rollback = strategy is MultitaskStrategy.ROLLBACK
        defaults = dict(thread_defaults or {})
        marked = 0
        if interrupting and self._signals is not None:
            # Older runs of other processes are marked with our row (the durable request);
            # the signal that makes it immediate goes out only if there was one to mark.
            record, marked = await self.store.create_follow_up(
                thread_id,
                run_id,
                stored_input,
                owner=self.owner,
                action="rollback" if rollback else "interrupt",
                thread_defaults=defaults,
                user_id=user_id,
            )
        else:
            record = await self.store.create_run(
                thread_id, run_id, stored_input, owner=self.owner, thread_defaults=defaults, user_id=user_id
            )
        # Resolved once: the same snapshot serves the task store, both hooks and the agent.
        handle = RunHandle(
            run_id,
            thread_id,
            self._extensions(),
            self.streams.writer(run_id),
            created_at=record.created_at,
            user_id=user_id,
        )
        await handle.stream.publish("metadata", {"run_id": run_id, "thread_id": thread_id})
        if interrupting:
            for previous in self.active_on(thread_id):
                if previous.interrupt(rollback=rollback):
                    logger.info(
                        "run %s interrupted by follow-up run %s on thread %s", previous.run_id, run_id, thread_id
                    )
        self._runs[run_id] = handle
        handle.task = asyncio.create_task(self._execute(handle, spec), name=f"deerflow-run-{run_id}")
        if self._signals is not None:
            self._ensure_backstop()
            if marked:
                await self._signal_interrupt(thread_id, run_id, record.created_at, rollback=rollback)
        return handle

    async def _signal_interrupt(
        self, thread_id: str, run_id: str, created_at: datetime | None, *, rollback: bool
    ) -> None:
        """After our task exists: an older run of the thread in another process stops now
        rather than at its process's next backstop read, so that ours gets the thread."""
        assert self._signals is not None
        try:
            await self._signals.publish_interrupt(thread_id, run_id, created_at, rollback=rollback)
        except Exception:
            logger.exception("run %s: could not signal other processes to interrupt thread %s", run_id, thread_id)

    async def _execute(self, handle: RunHandle, spec: LeadRunSpec) -> None:
        try:
            await execute_lead_run(handle, spec, self._deps)
        finally:
            self._runs.pop(handle.run_id, None)

    def cancel(self, run_id: str, *, rollback: bool = False) -> bool:
        """Interrupt a run of this process; False when it is unknown, done or finalizing."""
        handle = self._runs.get(run_id)
        return handle.interrupt(rollback=rollback) if handle is not None else False

    async def request_cancel(self, run_id: str, status: str | None = None, *, rollback: bool = False) -> bool:
        """Cancel a run wherever it executes: here directly, elsewhere through ``signals``.

        ``status`` is the run's persisted status when the caller has read it: a run that
        already ended is not signalled. ``rollback`` also restores the thread's state to
        before the run. True when a cancel was sent or published.
        """
        if run_id in self._runs:
            return self.cancel(run_id, rollback=rollback)
        live = status is None or status in (RunStatus.PENDING.value, RunStatus.RUNNING.value)
        if self._signals is None or not live:
            return False
        await self.store.request_cancel("rollback" if rollback else "interrupt", run_id=run_id)
        await self._signals.publish_cancel(run_id, rollback=rollback)
        return True

    def recheck(self) -> None:
        """Read the recorded stop requests now (the signal listener reconnected)."""
        self._recheck.set()

    def _ensure_backstop(self) -> None:
        if self._backstop is None or self._backstop.done():
            self._backstop = asyncio.get_running_loop().create_task(self._apply_recorded_requests())

    async def _apply_recorded_requests(self) -> None:
        """The durable backstop: apply stop requests whose signal this process missed."""
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._recheck.wait(), self._backstop_interval)
            self._recheck.clear()
            waiting = [h.run_id for h in self._runs.values() if h.phase not in (RunPhase.FINALIZING, RunPhase.DONE)]
            if not waiting:
                continue
            try:
                requests = await self.store.cancel_requests(waiting)
            except Exception as exc:
                logger.warning("could not read recorded cancel requests: %s", exc)
                continue
            for run_id, action in requests.items():
                if self.cancel(run_id, rollback=action == "rollback"):
                    logger.info("run %s stopped by a recorded %s request (its signal was missed)", run_id, action)

    def cancel_soon(self, run_id: str) -> None:
        """``request_cancel`` from code that must not await (a request being torn down):
        a run of this process is interrupted now, another process's is signalled in the
        background."""
        if self.cancel(run_id) or run_id in self._runs:
            return
        task = asyncio.get_running_loop().create_task(self.request_cancel(run_id), name=f"deerflow-cancel-{run_id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def wait_done(self, thread_id: str, run_id: str, *, poll: float = 0.1) -> None:
        """Until the run has ended, wherever it executes (its persisted status, for another
        process's run; a run this process owns is awaited directly)."""
        handle = self._runs.get(run_id)
        if handle is not None:
            await handle.wait()
            return
        while True:
            record = await self.store.get_run(thread_id, run_id)
            if record is None or record.status not in (RunStatus.PENDING.value, RunStatus.RUNNING.value):
                return
            await asyncio.sleep(poll)

    def interrupt_thread(
        self, thread_id: str, *, by_run_id: str, created_before: datetime | None, rollback: bool = False
    ) -> int:
        """A follow-up ``by_run_id`` was created (maybe in another process): stop older runs here."""
        count = 0
        for handle in self.active_on(thread_id):
            if handle.run_id == by_run_id:
                continue
            newer = created_before is not None and handle.created_at is not None and handle.created_at >= created_before
            if not newer and handle.interrupt(rollback=rollback):
                count += 1
                logger.info(
                    "run %s interrupted by follow-up run %s on thread %s (another process)",
                    handle.run_id,
                    by_run_id,
                    thread_id,
                )
        return count

    async def drain(self, grace: float = 30.0) -> None:
        """Stop admitting, interrupt every in-flight run and wait for each to finalize.

        Interrupted runs still persist and call ``on_task_stop`` (bounded by the notification
        budget). A run that is still not done after ``grace`` seconds is cancelled again, which cuts
        its finalization short — the last resort so shutdown cannot hang.
        """
        self._closed = True
        handles = list(self._runs.values())
        for handle in handles:
            handle.interrupt()
        tasks = [h.task for h in handles if h.task is not None]
        try:
            if tasks:
                await self._await_runs(tasks, grace)
        finally:
            # The sweeper and the signal listener stop only once no run needs them.
            await self._close_shared()

    async def _await_runs(self, tasks: list[asyncio.Task[None]], grace: float) -> None:
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            logger.warning("run task %s did not finish within %.1fs of shutdown; cancelling it", task.get_name(), grace)
            task.cancel()
        if pending:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(pending, timeout=5.0)

    async def _close_shared(self) -> None:
        await stop_task(self._backstop)
        await self._deps.coordinator.aclose()
        if self._signals is not None:
            await self._signals.aclose()
        await self.streams.aclose()
