"""The lead-run worker: the spec's exact order around the finalizing barrier.

1. Hold the thread (admission), mark the run started. Cancelled before this: no hooks. A
   stop arriving *while* it is marked takes effect right after ``on_task_start`` (see
   ``RunHandle.interrupt``): never a half-marked run.
2. ``notify_task_start`` — before the agent is built.
3. ``AgentHost.run_lead`` — the agent, goal continuations included.
4. Persist status and token usage, sync the thread's title and status, completion hooks.
5. ``notify_task_stop`` while the thread is still held.
6. Release the thread, then publish the stream end.

A ``KeyboardInterrupt``/``SystemExit`` from extension code never leaves the run task (it
would leave the event loop and end the Gateway): from a lifecycle notification it is the
extension's failure and the run goes on; reaching the run itself, it ends the run ``error``.
Either way it is logged with the extension's name (``extensions/boundary/exits.py``).

A cancel (stop button, follow-up interrupt, shutdown) is *absorbed* once it has been mapped
to the ``aborted`` outcome: the worker calls ``Task.uncancel()`` so persistence and
``on_task_stop`` run to completion instead of being cut short by the same cancel. A second
cancel — the shutdown drain giving up — still interrupts finalization.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from deerflow_ext.exception_text import exception_text
from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

from ..agents.host import LeadRunInput, LeadRunRequest
from ..extensions.boundary.exits import PROCESS_EXITS, contain_exit
from ..extensions.contract.snapshot import publish_snapshot
from ..extensions.notifications.lifecycle import TaskBracket, task_bracket
from ..persistence.models import THREAD_STATUS_AFTER, RunStatus, utcnow
from ..persistence.records import HostStore
from ..tokens import TokenUsage
from ..webhooks import WebhookOrder
from .coordinator import ThreadCoordinator
from .handle import RunHandle, RunPhase
from .journal import RunJournal, append_journal, journal_wanted
from .prometheus_metrics import record_run
from .stream_modes import DEFAULT_STREAM_MODES, StreamProjection, graph_stream_modes
from .wire import jsonable, searchable_values

__all__ = [
    "CompletionHook",
    "LeadRunSpec",
    "LeadRunner",
    "RunCompletion",
    "RunWorkerDeps",
    "execute_lead_run",
]

logger = logging.getLogger("deerflow_ext.runtime")

Emit = Callable[[str, Any], Awaitable[None]]


class LeadRunner(Protocol):
    """What the worker needs from ``deerflow_ext.agents.host.AgentHost``."""

    async def run_lead(self, request: Any, *, extensions: Any, task_store: Any, emit: Emit | None = None) -> Any: ...


@dataclass(frozen=True)
class RunCompletion:
    """What a completion hook learns about a finished run."""

    run_id: str
    thread_id: str
    status: str
    outcome: TaskOutcome
    result: Any = None
    error: BaseException | None = None
    # The run was interrupted with "rollback": its state changes are to be undone.
    rollback: bool = False


CompletionHook = Callable[[RunCompletion], Awaitable[None]]


@dataclass(frozen=True)
class RunWorkerDeps:
    store: HostStore
    coordinator: ThreadCoordinator
    agent_host: LeadRunner
    notify_budget: float | None = None
    completion_hooks: Sequence[CompletionHook] = field(default_factory=tuple)
    # Whether runs leave a journal (``journal``): None decides by the run's extensions.
    journal: bool | None = None


@dataclass(frozen=True)
class LeadRunSpec(LeadRunInput):
    """What a client asked this run to do (see ``gateway.schemas.RunCreate`` for the wire form).

    Beside the input the graph is given as asked (:class:`LeadRunInput`): ``stream_modes``
    are API stream modes (:mod:`.stream_modes`); ``recursion_limit`` is the host's default
    when ``None``; ``delay`` holds the run ``pending`` that many seconds before it asks for
    its thread (LangGraph's ``after_seconds``).
    """

    stream_modes: tuple[str, ...] = DEFAULT_STREAM_MODES
    recursion_limit: int | None = None
    delay: float = 0.0
    # The run's ``webhook``, checked when it was accepted: its end writes the delivery in
    # the same transaction as its final status (``deerflow_ext.webhooks``). None: nothing.
    webhook: WebhookOrder | None = None


#: The input a run's graph is given as the client asked it: all of it but these two.
_AS_ASKED = tuple(f.name for f in dataclasses.fields(LeadRunInput) if f.name not in ("context", "metadata"))


def _lead_request(handle: RunHandle, spec: LeadRunSpec) -> LeadRunRequest:
    # The snapshot key is written after the caller's context is merged, so a caller-supplied
    # value under it is never what the run uses.
    context = publish_snapshot(dict(spec.context), handle.extensions)
    asked: dict[str, Any] = {name: getattr(spec, name) for name in _AS_ASKED}
    if spec.recursion_limit is not None:
        asked["recursion_limit"] = spec.recursion_limit
    return LeadRunRequest(
        thread_id=handle.thread_id,
        run_id=handle.run_id,
        user_id=handle.user_id,
        context=context,
        stream_modes=graph_stream_modes(spec.stream_modes),
        metadata={**spec.metadata, "run_id": handle.run_id, "thread_id": handle.thread_id},
        events="events" in spec.stream_modes,
        **asked,
    )


def _absorb_cancel() -> None:
    # Every pending cancel request is absorbed: notify decides a contributor's
    # CancelledError by ``Task.cancelling()``, and a leftover count would make a
    # contributor's own timeout look like the host being cancelled.
    task = asyncio.current_task()
    while task is not None and task.cancelling():
        task.uncancel()


def _cancel_pending() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def execute_lead_run(handle: RunHandle, spec: LeadRunSpec, deps: RunWorkerDeps) -> None:
    """Run one lead run to its end; never raises for the run's own failures."""
    status, outcome = RunStatus.INTERRUPTED, TaskOutcome.ABORTED
    started: float | None = None
    try:
        try:
            handle.phase = RunPhase.QUEUED
            if handle.interrupted:  # stopped before this task first ran (see RunHandle.interrupt)
                raise asyncio.CancelledError
            if spec.delay > 0:
                await asyncio.sleep(spec.delay)  # still pending: a cancel now means no hooks
            async with deps.coordinator.hold(handle.thread_id, handle.run_id):
                handle.phase = RunPhase.ADMITTING  # interrupts are only marked until RUNNING
                if not await deps.store.mark_started(handle.run_id, handle.thread_id):
                    # Ended by another process while it was queued (runtime/presence.py).
                    logger.warning("run %s was ended elsewhere while it was queued; not starting it", handle.run_id)
                    return
                handle.phase = RunPhase.RUNNING
                started = time.monotonic()
                if spec.webhook is not None:
                    handle.started_at = datetime.now(UTC)
                status, outcome = await _lifecycle(handle, spec, deps)
        except asyncio.CancelledError:
            if handle.phase not in _NOT_STARTED:
                raise  # a second cancel during finalization: the drain gave up on us
            # Cancelled before admission: no hooks, but the row must not stay "pending".
            _absorb_cancel()
            await _persist_unstarted(handle, deps, webhook=spec.webhook)
        except Exception as exc:
            if handle.phase not in _NOT_STARTED:
                # The run finished and was persisted; only releasing the thread failed.
                logger.exception("run %s: releasing its thread failed", handle.run_id)
                return
            # Admission itself failed (e.g. the coordinator lost its database connection):
            # the run never started, so it gets no hooks, but it must not stay "pending".
            logger.exception("run %s could not be admitted", handle.run_id)
            status, outcome = RunStatus.ERROR, TaskOutcome.FAILED
            await handle.stream.publish("error", {"error": type(exc).__name__, "message": str(exc)})
            await _persist_unstarted(
                handle, deps, status=status, error=f"not admitted: {exception_text(exc)}", webhook=spec.webhook
            )
    finally:
        record_run(outcome.value, None if started is None else time.monotonic() - started)
        handle.phase = RunPhase.DONE
        try:
            await handle.stream.close({"run_id": handle.run_id, "status": status.value, "outcome": outcome.value})
        finally:
            handle.finished.set()


_NOT_STARTED = (RunPhase.CREATED, RunPhase.QUEUED, RunPhase.ADMITTING)


async def _persist_unstarted(
    handle: RunHandle,
    deps: RunWorkerDeps,
    *,
    status: RunStatus = RunStatus.INTERRUPTED,
    error: str = "interrupted before it started",
    webhook: WebhookOrder | None = None,
) -> None:
    outcome = TaskOutcome.ABORTED if status is RunStatus.INTERRUPTED else TaskOutcome.FAILED
    thread: dict[str, Any] = {}
    if handle.phase is RunPhase.ADMITTING:
        # Only a hard cancel (the drain giving up) or a database failure ends admission
        # midway; "mark started" may have committed, so the thread must not stay busy.
        error = error.replace("before it started", "while it was being admitted")
        thread = {"thread_id": handle.thread_id, "thread_status": THREAD_STATUS_AFTER[status].value}
    owed = None if webhook is None else _owed(handle, webhook, status, error, None)
    try:
        await deps.store.finish_run(
            handle.run_id, status=status.value, outcome=outcome.value, error=error, webhook=owed, **thread
        )
    except Exception:
        logger.exception("run %s: could not persist its interruption", handle.run_id)
    else:
        if webhook is not None:
            webhook.wake()


def _owed(handle: RunHandle, webhook: WebhookOrder, status: RunStatus, error: str | None, values: Any) -> Any:
    """The outbox row of the run's webhook (``webhooks.order``), written with its end."""
    return webhook.outbox_row(
        run_id=handle.run_id,
        thread_id=handle.thread_id,
        status=status.value,
        created_at=handle.created_at,
        started_at=handle.started_at,
        error=error,
        values=None if values is None else jsonable(values),
    )


async def _lifecycle(handle: RunHandle, spec: LeadRunSpec, deps: RunWorkerDeps) -> tuple[RunStatus, TaskOutcome]:
    """Steps 2 to 5, inside the thread hold."""
    extensions = handle.extensions
    task_store = extensions.new_task_store(handle.run_id)
    info = TaskInfo(
        task_id=handle.run_id,
        run_id=handle.run_id,
        thread_id=handle.thread_id,
        kind="lead",
        agent_name="lead",
        user_id=handle.user_id,
    )
    where = f"run {handle.run_id}"
    # No task store means no lifecycle contributor: nothing to notify.
    wanted = journal_wanted(extensions) if deps.journal is None else deps.journal
    journal = RunJournal(handle.run_id, len(spec.messages), utcnow()) if wanted else None
    async with task_bracket(extensions, task_store, info, where=where, budget=deps.notify_budget) as bracket:
        status, outcome, error, error_text, result = await _run(handle, spec, deps, bracket, task_store, journal)
        bracket.outcome = outcome  # on_task_stop follows persistence and the completion hooks
        handle.phase = RunPhase.FINALIZING
        await _persist(handle, deps, status, outcome, result, error, error_text, spec.webhook, journal)
        if result is not None:  # completed, or paused by the graph (its values hold the interrupts)
            handle.final_values = getattr(result, "values", None)
        await _run_completion_hooks(
            deps,
            RunCompletion(
                handle.run_id, handle.thread_id, status.value, outcome, result, error, rollback=handle.rollback
            ),
        )
    return status, outcome


async def _run(
    handle: RunHandle,
    spec: LeadRunSpec,
    deps: RunWorkerDeps,
    bracket: TaskBracket,
    task_store: ExtensionData | None,
    journal: RunJournal | None = None,
) -> tuple[RunStatus, TaskOutcome, BaseException | None, str | None, Any]:
    """Step 3: the run itself, its failure caught and described (never raised)."""
    result: Any = None
    error: BaseException | None = None
    error_text: str | None = None
    where = f"run {handle.run_id}"
    try:
        await bracket.start()
        if handle.interrupted and not _cancel_pending():
            # Stopped while being admitted: marked started, so it got on_task_start; it ends
            # here, aborted, and gets on_task_stop (RunHandle.interrupt).
            raise asyncio.CancelledError

        projection = StreamProjection(spec.stream_modes)

        async def publish(mode: str, chunk: Any) -> None:
            for event, data in projection.events(mode, chunk):
                await handle.stream.publish(event, data)

        emit = publish if journal is None else journal.tap(publish)

        result = await deps.agent_host.run_lead(
            _lead_request(handle, spec), extensions=handle.extensions, task_store=task_store, emit=emit
        )
        if getattr(result, "interrupted", False):
            # Paused by the graph (a breakpoint, or interrupt() in a node, tool or middleware):
            # control flow, not a failure. The thread waits for a resume; the task did not
            # complete, so its outcome is the conservative one.
            status, outcome = RunStatus.INTERRUPTED, TaskOutcome.ABORTED
        else:
            status, outcome = RunStatus.SUCCESS, TaskOutcome.COMPLETED
    except asyncio.CancelledError as exc:
        _absorb_cancel()
        status, outcome, error = RunStatus.INTERRUPTED, TaskOutcome.ABORTED, exc
    except Exception as exc:
        # One line; the traceback only when DEBUG is on (a failing provider would otherwise
        # put a 150-line stack in the log for every run).
        logger.warning(
            "run %s failed: %s",
            handle.run_id,
            exception_text(exc),
            exc_info=exc if logger.isEnabledFor(logging.DEBUG) else None,
        )
        status, outcome, error = RunStatus.ERROR, TaskOutcome.FAILED, exc
        await handle.stream.publish("error", {"error": type(exc).__name__, "message": str(exc)})
    except PROCESS_EXITS as exc:
        # Reached the run itself (a contributed tool, say): the run fails, the loop lives on.
        error_text = contain_exit(exc, where=where)
        status, outcome, error = RunStatus.ERROR, TaskOutcome.FAILED, exc
        await handle.stream.publish("error", {"error": type(exc).__name__, "message": error_text})

    return status, outcome, error, error_text, result


async def _persist(
    handle: RunHandle,
    deps: RunWorkerDeps,
    status: RunStatus,
    outcome: TaskOutcome,
    result: Any,
    error: BaseException | None,
    error_text: str | None = None,
    webhook: WebhookOrder | None = None,
    journal: RunJournal | None = None,
) -> None:
    # A database failure here is logged, not raised: on_task_stop must still run. What the
    # run produced may itself be what the database refuses (an answer holding a lone
    # surrogate or a NUL), so a failed save is retried with the outcome alone: the run then
    # still ends with a terminal status and its thread is not left busy. Only when even that
    # fails (the database is gone) is the row left to the startup recovery.
    if error is not None and error_text is None:
        error_text = "interrupted" if status is RunStatus.INTERRUPTED else exception_text(error)
    thread: dict[str, Any] = {"thread_id": handle.thread_id, "thread_status": THREAD_STATUS_AFTER[status].value}
    tokens = TokenUsage.of(getattr(result, "token_usage", None)) if result is not None else None
    values = getattr(result, "values", None)
    owed = None if webhook is None else _owed(handle, webhook, status, error_text, values)
    if journal is not None:  # before the status: a reader that sees the run ended finds its events
        rows = journal.rows(status, values, getattr(result, "answer", None), error_text, utcnow())
        await append_journal(deps.store, handle.thread_id, journal, rows)
    try:
        await deps.store.finish_run(
            handle.run_id,
            status=status.value,
            outcome=outcome.value,
            answer=getattr(result, "answer", None),
            error=error_text,
            tokens=tokens,
            title=getattr(result, "title", None),
            state_values=searchable_values(values) if values else None,
            webhook=owed,
            **thread,
        )
        if webhook is not None:
            webhook.wake()
        return
    except Exception as exc:
        logger.warning(
            "run %s: could not save its completion (%s); saving its outcome alone", handle.run_id, exception_text(exc)
        )
        unsaved = f"its result could not be saved: {type(exc).__name__}"
    outcome_only = functools.partial(
        deps.store.finish_run,
        handle.run_id,
        status=status.value,
        outcome=outcome.value,
        error=unsaved if error_text is None else f"{error_text[:2000]!a}; {unsaved}",
        tokens=tokens,
        # A payload the database refused is not sent again: the receiver still learns the run ended.
        webhook=None if owed is None else {**owed, "payload": {**owed["payload"], "values": None}},
        **thread,
    )
    try:
        await outcome_only()
        if webhook is not None:
            webhook.wake()
    except Exception as exc:
        # The database is away (a restart, a failover). The run must not stay "running" until
        # this process restarts: the outcome is saved again in the background until the
        # database takes it; the run's hooks and its thread's release do not wait for that.
        logger.warning(
            "run %s: could not persist its completion (%s); retrying in the background",
            handle.run_id,
            exception_text(exc),
        )
        _retry_in_background(handle.run_id, outcome_only)


_RETRYING: set[asyncio.Task[None]] = set()
"""Outcomes being saved again (held so the loop does not drop them); shutdown cancels them
with the loop, and startup recovery marks what they did not save."""
RETRY_FIRST_DELAY = 0.5
RETRY_MAX_DELAY = 30.0


def _retry_in_background(run_id: str, save: Callable[[], Awaitable[Any]]) -> None:
    async def retry() -> None:
        delay = RETRY_FIRST_DELAY
        while True:
            await asyncio.sleep(delay)
            try:
                await save()
            except Exception as exc:
                delay = min(delay * 2, RETRY_MAX_DELAY)
                logger.debug("run %s: its completion is still not saved (%s)", run_id, exception_text(exc))
            else:
                logger.info("run %s: its completion was saved once the database answered", run_id)
                return

    task = asyncio.get_running_loop().create_task(retry(), name=f"save-outcome-{run_id}")
    _RETRYING.add(task)
    task.add_done_callback(_RETRYING.discard)


async def _run_completion_hooks(deps: RunWorkerDeps, completion: RunCompletion) -> None:
    for hook in deps.completion_hooks:
        try:
            await hook(completion)
        except Exception:
            logger.exception("run %s: completion hook %r failed", completion.run_id, hook)
