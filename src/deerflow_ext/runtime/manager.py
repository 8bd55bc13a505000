"""``RunManager``: creates runs, admits follow-ups, cancels, and drains at shutdown.

A follow-up run on a busy thread interrupts the run in progress (and any run still waiting
for the thread): the newest request is what the user wants answered. The interrupted run
still finalizes — persistence, ``on_task_stop`` — before the follow-up's lifecycle starts,
because the follow-up waits for the thread hold (see ``coordinator``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..extensions.snapshot import LoadedExtensions, get_loaded_extensions
from ..persistence.records import PROCESS_OWNER, HostStore
from .coordinator import LocalThreadCoordinator, ThreadCoordinator
from .handle import RunHandle, RunPhase
from .stream import RunStream
from .worker import CompletionHook, LeadRunner, LeadRunSpec, RunWorkerDeps, execute_lead_run

__all__ = ["RunManager", "RunsClosedError"]

logger = logging.getLogger("deerflow_ext.runtime")


class RunsClosedError(RuntimeError):
    """The Gateway is shutting down and admits no new runs."""


class RunManager:
    """In-flight runs of this process."""

    def __init__(
        self,
        *,
        store: HostStore,
        agent_host: LeadRunner,
        coordinator: ThreadCoordinator | None = None,
        extensions: Callable[[], LoadedExtensions] = get_loaded_extensions,
        owner: str = PROCESS_OWNER,
        notify_budget: float | None = None,
        completion_hooks: Sequence[CompletionHook] = (),
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
        )
        self._runs: dict[str, RunHandle] = {}
        self._closed = False

    @property
    def coordinator(self) -> ThreadCoordinator:
        return self._deps.coordinator

    @property
    def in_flight(self) -> tuple[RunHandle, ...]:
        return tuple(self._runs.values())

    def get(self, run_id: str) -> RunHandle | None:
        return self._runs.get(run_id)

    def active_on(self, thread_id: str) -> tuple[RunHandle, ...]:
        return tuple(
            h for h in self._runs.values() if h.thread_id == thread_id and h.phase is not RunPhase.DONE
        )

    async def start(
        self,
        thread_id: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        goal: str | None = None,
        context: Mapping[str, Any] | None = None,
        run_input: Mapping[str, Any] | None = None,
    ) -> RunHandle:
        """Persist a pending run, interrupt the thread's current run, start the worker."""
        if self._closed:
            raise RunsClosedError("the Gateway is shutting down; no new runs are accepted")
        run_id = str(uuid.uuid4())
        spec = LeadRunSpec(tuple(dict(m) for m in messages), goal, dict(context or {}))
        stored_input = (
            dict(run_input) if run_input is not None else {"messages": list(spec.messages), "goal": goal}
        )
        await self.store.create_run(thread_id, run_id, stored_input, owner=self.owner)
        # Resolved once: the same snapshot serves the task store, both hooks and the agent.
        handle = RunHandle(run_id, thread_id, self._extensions(), RunStream(run_id))
        handle.stream.publish("metadata", {"run_id": run_id, "thread_id": thread_id})
        for previous in self.active_on(thread_id):
            if previous.interrupt():
                logger.info(
                    "run %s interrupted by follow-up run %s on thread %s", previous.run_id, run_id, thread_id
                )
        self._runs[run_id] = handle
        handle.task = asyncio.create_task(self._execute(handle, spec), name=f"deerflow-run-{run_id}")
        return handle

    async def _execute(self, handle: RunHandle, spec: LeadRunSpec) -> None:
        try:
            await execute_lead_run(handle, spec, self._deps)
        finally:
            self._runs.pop(handle.run_id, None)

    def cancel(self, run_id: str) -> bool:
        """Interrupt a run of this process; False when it is unknown, done or finalizing."""
        handle = self._runs.get(run_id)
        return handle.interrupt() if handle is not None else False

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
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            logger.warning(
                "run task %s did not finish within %.1fs of shutdown; cancelling it", task.get_name(), grace
            )
            task.cancel()
        if pending:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(pending, timeout=5.0)
        await self._deps.coordinator.aclose()
