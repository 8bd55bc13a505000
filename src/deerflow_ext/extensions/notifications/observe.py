"""Observation of the host's own model calls and of context compaction.

The spec's rules are docs/SPEC.md's "System model calls" and "Context compaction", with the
fail-open rules of "Notifications and fail-open" (observers get no budget).

Goal evaluation, memory extraction, title generation and summarization call a model outside
the agent's middleware chain, so :func:`observe_system_call` wraps each of them. Every
terminal path is reported, and the host always sees the call's own result or exception,
unchanged:

* success and failure notify the observers inline (awaited, on the notification loop);
* an observer's ``KeyboardInterrupt``/``SystemExit`` ends the notification (docs/SPEC.md) and is
  contained here, attributed (``exits.py``): the host's call is unaffected;
* cancellation is routine — stopping a run or interrupting it with a follow-up cancels the
  call after the provider tokens are spent — but awaiting observers at that point would be
  interrupted by a repeated cancel before any of them ran. So the observation is *submitted*
  to the notification loop and the cancellation re-raised at once. With no registered loop,
  or once shutdown has closed intake, it is dropped, exactly as the memory bridge drops its
  observations.

Compaction observers are always fire-and-forget: the summary is produced inside a model turn
that must not wait on extensions.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from deerflow_extension_api import (
    CompactionEvent,
    ExtensionData,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
)

from ..boundary.exits import PROCESS_EXITS, contain_exit
from ..contract.stores import detached_store, store_or_detached
from .notification_loop import notification_loop
from .notify_plans import _notify_each

if TYPE_CHECKING:
    from ..contract.snapshot import LoadedExtensions

__all__ = [
    "observe_system_call",
    "observe_system_call_sync",
    "submit_compaction",
    "submit_system_observation",
    "wants_compaction",
]

T = TypeVar("T")

# Observers get no budget: the spec bounds only task-lifecycle notifications.
_UNBOUNDED = math.inf


def _observation(
    ext: LoadedExtensions,
    task_store: ExtensionData | None,
    kind: SystemOperationKind,
    request: SystemModelRequest,
    result: SystemModelResult,
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A factory for one notification; its detached store is created when it runs."""

    def notify() -> Coroutine[Any, Any, None]:
        store = store_or_detached(task_store)
        return _notify_each(
            ext.system_model_observers,
            "on_system_model_call",
            (ext.app_store, store, kind, request, result),
            task_id=store.scope_id,
            budget=_UNBOUNDED,
        )

    return notify


async def observe_system_call(
    ext: LoadedExtensions,
    task_store: ExtensionData | None,
    kind: SystemOperationKind,
    request: SystemModelRequest,
    call: Callable[[], Awaitable[T]],
) -> T:
    """Run ``call()`` — one host-owned model call — and report it to system-model observers.

    Returns what ``call()`` returns and raises what it raises (the same object). Observer
    failures are logged and never reach the caller; with no observers registered the call
    goes straight through, without timing or allocation.
    """
    if not ext.system_model_observers:
        return await call()
    started = time.perf_counter()
    try:
        response = await call()
    except asyncio.CancelledError as exc:
        result = SystemModelResult(error=exc, duration_ms=(time.perf_counter() - started) * 1000.0)
        notification_loop.submit(_observation(ext, task_store, kind, request, result), what=_what(kind))
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        result = SystemModelResult(error=exc, duration_ms=(time.perf_counter() - started) * 1000.0)
        await _notify_inline(_observation(ext, task_store, kind, request, result), kind)
        raise
    result = SystemModelResult(response=response, duration_ms=(time.perf_counter() - started) * 1000.0)
    await _notify_inline(_observation(ext, task_store, kind, request, result), kind)
    return response


async def _notify_inline(observation: Callable[[], Coroutine[Any, Any, None]], kind: SystemOperationKind) -> None:
    # An observer's KeyboardInterrupt/SystemExit stops the notification (docs/SPEC.md) and ends here:
    # the host still sees its call's own result or exception (exits.py).
    try:
        await notification_loop.run(observation)
    except PROCESS_EXITS as exc:
        contain_exit(exc, where=_what(kind))


def observe_system_call_sync(
    ext: LoadedExtensions,
    task_store: ExtensionData | None,
    kind: SystemOperationKind,
    request: SystemModelRequest,
    call: Callable[[], T],
) -> T:
    """:func:`observe_system_call` for a synchronous call (a direct ``graph.invoke``).

    There is no loop to await observers on, so the finished observation is submitted
    fire-and-forget (dropped when no notification loop is registered, as for the memory
    bridge). Returns and raises what ``call()`` does.
    """
    if not ext.system_model_observers:
        return call()
    started = time.perf_counter()
    try:
        response = call()
    except Exception as exc:
        failed = SystemModelResult(error=exc, duration_ms=(time.perf_counter() - started) * 1000.0)
        submit_system_observation(ext, task_store, kind, request, failed)
        raise
    done = SystemModelResult(response=response, duration_ms=(time.perf_counter() - started) * 1000.0)
    submit_system_observation(ext, task_store, kind, request, done)
    return response


def submit_system_observation(
    ext: LoadedExtensions,
    task_store: ExtensionData | None,
    kind: SystemOperationKind,
    request: SystemModelRequest,
    result: SystemModelResult,
) -> bool:
    """Report an already-finished system call without waiting (callable from any thread).

    For the memory bridge, which runs on a worker thread with no loop to await on. Returns
    ``False`` when nothing was scheduled: no observers, no loop, or intake closed.
    """
    if not ext.system_model_observers:
        return False
    return notification_loop.submit(_observation(ext, task_store, kind, request, result), what=_what(kind))


def wants_compaction(ext: LoadedExtensions) -> bool:
    """Whether anyone observes compaction; when not, the host skips the hashing pass too."""
    return bool(ext.compaction_observers)


def submit_compaction(ext: LoadedExtensions, event: CompactionEvent) -> bool:
    """Report a compaction, fire-and-forget, each observer with a fresh detached store.

    Returns ``False`` when nothing was scheduled: no observers, no loop, or intake closed.
    """
    contributions = ext.compaction_observers
    if not contributions:
        return False

    def notify() -> Coroutine[Any, Any, None]:
        store = detached_store()
        return _notify_each(
            contributions,
            "on_context_compacted",
            (ext.app_store, store, event),
            task_id=event.task_id or store.scope_id,
            budget=_UNBOUNDED,
        )

    return notification_loop.submit(notify, what="compaction observation")


def _what(kind: SystemOperationKind) -> str:
    return f"{kind.value} system-model observation"
