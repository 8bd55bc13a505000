"""DeerMem: a small, vendorable memory engine.

It extracts durable facts from a conversation with one model call, debounced per thread,
on a worker thread, and keeps them in process memory. One timer thread keeps every
thread's deadline and hands due extractions to a few kept workers: a ``threading.Timer``
per request started an OS thread per conversation turn, and the caller (a Gateway's event
loop) waited for it to start, ~290 us a call against ~17 us now. The workers are
not a ``ThreadPoolExecutor``'s: its threads never end when idle, and the interpreter joins
them at exit, so one extraction stuck in a model call would hold the process open; these
are daemons that end after :data:`IDLE_SECONDS` without work.

It is deliberately standalone: it imports neither ``deerflow_extension_api`` nor
``deerflow_ext.extensions`` (an import-linter contract and a test enforce this), so it can
be copied into another project.
The host observes it through one hook, :class:`MemoryCallbacks`, instead of the extension
API's observer types; the host side translates (see ``deerflow_ext.memory.manager``).
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

__all__ = [
    "IDLE_SECONDS",
    "MAX_FACTS_PER_THREAD",
    "MAX_WORKERS",
    "MemoryCallbacks",
    "MemoryEngine",
    "MemoryLLMResult",
    "parse_facts",
]

logger = logging.getLogger("deerflow_ext.memory")

#: Oldest facts are dropped beyond this, so a long-lived thread cannot grow without bound.
MAX_FACTS_PER_THREAD = 100

#: Extractions running at once, each on a worker thread of its own; more due ones wait.
MAX_WORKERS = 16

#: A worker with nothing to do for this long ends, as the timer thread does when no deadline
#: is left, so an engine nobody shuts down is not kept alive by its own threads.
IDLE_SECONDS = 10.0


class MemoryLLMResult(TypedDict):
    """What the hook is told of one extraction call, always by keyword.

    Declared once, here, so that the engine (which passes them) and a host's callbacks
    (which read them) name the same fields.
    """

    messages: Sequence[Any]
    response: str | None
    error: BaseException | None
    duration_ms: float
    model_name: str | None


@runtime_checkable
class MemoryCallbacks(Protocol):
    """The host hook: told about every extraction call, successful or not."""

    def on_memory_llm_result(self, **result: Unpack[MemoryLLMResult]) -> None: ...


@dataclass(eq=False)
class _Pending:
    messages: list[Any]
    callbacks: MemoryCallbacks | None


def parse_facts(text: str) -> list[str]:
    """The facts in a model reply: a JSON list of strings, optionally in a code fence."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        body = body.split("\n", 1)[1] if "\n" in body else ""
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end < start:
        raise ValueError("no JSON list in the reply")
    value = json.loads(body[start : end + 1])
    if not isinstance(value, list):
        raise ValueError("the reply is not a JSON list")
    return [item.strip() for item in value if isinstance(item, str) and item.strip()]


class MemoryEngine:
    """Debounced, per-thread fact extraction.

    ``extract`` is the synchronous model call: it receives the conversation and returns the
    model's text, expected to be a JSON list of facts. ``schedule`` sets a deadline per
    thread; a newer schedule for the same thread replaces the pending one, so a burst of
    turns costs one extraction over the latest conversation. ``callbacks`` (engine-wide, or
    per ``schedule``) hear about every extraction call. Due extractions run on up to
    ``max_workers`` worker threads, started as they are needed and kept.
    """

    def __init__(
        self,
        extract: Callable[[list[Any]], str],
        callbacks: MemoryCallbacks | None = None,
        debounce_seconds: float = 0.5,
        *,
        model_name: str | None = None,
        max_facts: int = MAX_FACTS_PER_THREAD,
        max_workers: int = MAX_WORKERS,
    ) -> None:
        if debounce_seconds < 0:
            raise ValueError("debounce_seconds must be >= 0")
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self._extract = extract
        self._callbacks = callbacks
        self._debounce = debounce_seconds
        self._model_name = model_name
        self._max_facts = max_facts
        self._max_workers = max_workers
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a deadline, a finished extraction, closing
        self._pending: dict[str, _Pending] = {}
        # (due, order, thread id, request); a request no longer in _pending is skipped.
        self._deadlines: list[tuple[float, int, str, _Pending]] = []
        self._order = itertools.count()
        self._timer: threading.Thread | None = None
        self._due: queue.SimpleQueue[tuple[str, _Pending] | None] = queue.SimpleQueue()
        self._workers = 0  # alive
        self._handed = 0  # extractions handed to the workers and not yet ended
        self._running: set[threading.Thread] = set()
        self._retired: set[threading.Thread] = set()  # idle workers that already counted themselves out
        self._facts: dict[str, list[str]] = {}
        self._closed = False

    # -- public ----------------------------------------------------------------------------
    def schedule(self, thread_id: str, messages: Sequence[Any], *, callbacks: MemoryCallbacks | None = None) -> None:
        """Extract facts from ``messages`` after the debounce, replacing a pending request.

        ``callbacks`` overrides the engine-wide callbacks for this request (a host uses it to
        carry per-run context the hook signature has no room for).
        """
        pending = _Pending(list(messages), callbacks if callbacks is not None else self._callbacks)
        with self._lock:
            if self._closed:
                logger.debug("memory engine is shut down; dropping the update for thread %s", thread_id)
                return
            self._pending[thread_id] = pending  # replaces the previous request, if any
            due = time.monotonic() + self._debounce
            first = not self._deadlines or due < self._deadlines[0][0]
            heapq.heappush(self._deadlines, (due, next(self._order), thread_id, pending))
            if self._timer is None:
                self._timer = threading.Thread(target=self._keep_time, name="deermem-timer", daemon=True)
                self._timer.start()
            elif first:
                self._changed.notify_all()

    def facts(self, thread_id: str) -> list[str]:
        """The facts known for ``thread_id``, oldest first (a copy)."""
        with self._lock:
            return list(self._facts.get(thread_id, ()))

    def flush(self, timeout: float | None = None) -> None:
        """Run every pending extraction now and wait for in-flight ones.

        The extractions run on a worker thread, never on the caller's: the provider call is
        guarded with ``BaseException`` (see :meth:`_extract_once`), which is only safe off the
        caller's thread.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            due = list(self._pending.items())
            self._pending.clear()
            self._deadlines.clear()
        if due:
            worker = threading.Thread(target=self._run_all, args=(due,), name="deermem-flush", daemon=True)
            worker.start()
            worker.join(timeout)
        me = threading.current_thread()
        with self._lock:  # extractions already handed to a worker end too
            while self._handed > (1 if me in self._running else 0):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._changed.wait(left)

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting work, flush what is pending, then let the threads end."""
        with self._lock:
            self._closed = True
        self.flush(timeout)
        with self._lock:
            self._changed.notify_all()  # the timer thread ends
            workers = self._workers
        for _ in range(workers):
            self._due.put(None)

    # -- worker side -----------------------------------------------------------------------
    def _keep_time(self) -> None:
        """The timer thread: hands each request to a worker when its deadline comes, unless a
        newer request for the same thread (or a flush) replaced it meanwhile."""
        with self._lock:
            while not self._closed and self._deadlines:
                due, _, thread_id, pending = self._deadlines[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                heapq.heappop(self._deadlines)
                if self._pending.get(thread_id) is not pending:
                    continue  # replaced or flushed meanwhile
                del self._pending[thread_id]
                self._due.put((thread_id, pending))
                self._handed += 1
                if self._handed > self._workers < self._max_workers:  # none of them is free
                    self._workers += 1
                    threading.Thread(target=self._work, name="deermem-worker", daemon=True).start()
            self._timer = None  # the next schedule starts another

    def _work(self) -> None:
        """A worker: runs due extractions until shutdown. An exception that escapes one (a
        callback's ``BaseException``) ends the worker as it ended a timer thread, reported by
        ``threading.excepthook``, and another worker starts in its place."""
        me = threading.current_thread()
        job: tuple[str, _Pending] | None = None
        try:
            job = self._next()
            while job is not None:
                with self._lock:
                    self._running.add(me)
                try:
                    self._extract_once(*job)
                finally:
                    with self._lock:
                        self._running.discard(me)
                        self._handed -= 1
                        self._changed.notify_all()
                job = self._next()
        finally:
            with self._lock:
                if me in self._retired:
                    self._retired.discard(me)
                else:
                    self._workers -= 1
                self._changed.notify_all()
                if job is not None and self._handed > self._workers:  # ended by an exception: replaced
                    self._workers += 1
                    threading.Thread(target=self._work, name="deermem-worker", daemon=True).start()

    def _next(self) -> tuple[str, _Pending] | None:
        """A worker's next due extraction; None when it should end (shutdown, or idle for
        :data:`IDLE_SECONDS` while the other workers can take every extraction handed over)."""
        while True:
            try:
                return self._due.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._handed < self._workers:
                        self._workers -= 1  # decided under the lock the timer thread counts under
                        self._retired.add(threading.current_thread())
                        return None
                    # else: an extraction was handed over counting on this worker

    def _run_all(self, due: list[tuple[str, _Pending]]) -> None:
        for thread_id, pending in due:
            self._extract_once(thread_id, pending)

    def _extract_once(self, thread_id: str, pending: _Pending) -> None:
        response: str | None = None
        error: BaseException | None = None
        started = time.monotonic()
        # BaseException, not Exception: every terminal path of the provider call must reach
        # the callbacks, including the odd provider SDK that raises a BaseException subclass.
        # This is safe only because it runs on a worker thread (a due extraction's worker, the flush
        # worker, or an executor the host offloads to): cancelling an awaiting coroutine never
        # interrupts a running thread, so no CancelledError can arrive here to be swallowed,
        # and KeyboardInterrupt is delivered to the main thread, not to this one.
        try:
            response = self._extract(pending.messages)
        except BaseException as exc:
            error = exc
        duration_ms = (time.monotonic() - started) * 1000.0
        self._report(pending, response, error, duration_ms)
        if error is not None:
            # Worded as the host's other system calls' failures (``agents.system_calls``): memory
            # is an aid, the run it came from has its answer already.
            logger.warning(
                "the host's memory call on model %s failed (%s: %s); thread %s remembers nothing new",
                self._model_name or "(unnamed)",
                type(error).__name__,
                " ".join(str(error).split())[:300],
                thread_id,
            )
            return
        try:
            facts = parse_facts(response if isinstance(response, str) else str(response))
        except (ValueError, TypeError) as exc:
            logger.warning("memory extraction for thread %s returned no usable facts: %s", thread_id, exc)
            return
        self._remember(thread_id, facts)

    def _report(self, pending: _Pending, response: str | None, error: BaseException | None, duration_ms: float) -> None:
        if pending.callbacks is None:
            return
        # Exception, not BaseException: only the hook's own failures are non-fatal; an
        # observability path must not swallow SystemExit or KeyboardInterrupt.
        try:
            pending.callbacks.on_memory_llm_result(
                messages=tuple(pending.messages),
                response=response,
                error=error,
                duration_ms=duration_ms,
                model_name=self._model_name,
            )
        except Exception:
            logger.warning("memory callback on_memory_llm_result failed", exc_info=True)

    def _remember(self, thread_id: str, facts: list[str]) -> None:
        with self._lock:
            known = self._facts.setdefault(thread_id, [])
            for fact in facts:
                if fact not in known:
                    known.append(fact)
            del known[: max(0, len(known) - self._max_facts)]
