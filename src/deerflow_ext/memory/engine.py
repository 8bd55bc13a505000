"""DeerMem: a small, vendorable memory engine.

It extracts durable facts from a conversation with one model call, debounced per thread,
on a worker thread, and keeps them in process memory. It is deliberately standalone: it
imports neither ``deerflow_extension_api`` nor ``deerflow_ext.extensions`` (an
import-linter contract and a test enforce this), so it can be copied into another project.
The host observes it through one hook, :class:`MemoryCallbacks`, instead of the extension
API's observer types; the host side translates (see ``deerflow_ext.memory.manager``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["MAX_FACTS_PER_THREAD", "MemoryCallbacks", "MemoryEngine", "parse_facts"]

logger = logging.getLogger("deerflow_ext.memory")

#: Oldest facts are dropped beyond this, so a long-lived thread cannot grow without bound.
MAX_FACTS_PER_THREAD = 100


@runtime_checkable
class MemoryCallbacks(Protocol):
    """The host hook: told about every extraction call, successful or not."""

    def on_memory_llm_result(
        self,
        *,
        messages: Sequence[Any],
        response: str | None,
        error: BaseException | None,
        duration_ms: float,
        model_name: str | None,
    ) -> None: ...


@dataclass
class _Pending:
    messages: list[Any]
    callbacks: MemoryCallbacks | None
    timer: threading.Timer | None = None


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
    model's text, expected to be a JSON list of facts. ``schedule`` arms a timer per thread;
    a newer schedule for the same thread replaces the pending one, so a burst of turns costs
    one extraction over the latest conversation. ``callbacks`` (engine-wide, or per
    ``schedule``) hear about every extraction call.
    """

    def __init__(
        self,
        extract: Callable[[list[Any]], str],
        callbacks: MemoryCallbacks | None = None,
        debounce_seconds: float = 0.5,
        *,
        model_name: str | None = None,
        max_facts: int = MAX_FACTS_PER_THREAD,
    ) -> None:
        if debounce_seconds < 0:
            raise ValueError("debounce_seconds must be >= 0")
        self._extract = extract
        self._callbacks = callbacks
        self._debounce = debounce_seconds
        self._model_name = model_name
        self._max_facts = max_facts
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._running: set[threading.Thread] = set()
        self._facts: dict[str, list[str]] = {}
        self._closed = False

    # -- public ----------------------------------------------------------------------------
    def schedule(
        self, thread_id: str, messages: Sequence[Any], *, callbacks: MemoryCallbacks | None = None
    ) -> None:
        """Extract facts from ``messages`` after the debounce, replacing a pending request.

        ``callbacks`` overrides the engine-wide callbacks for this request (a host uses it to
        carry per-run context the hook signature has no room for).
        """
        pending = _Pending(list(messages), callbacks if callbacks is not None else self._callbacks)
        with self._lock:
            if self._closed:
                logger.debug("memory engine is shut down; dropping the update for thread %s", thread_id)
                return
            previous = self._pending.pop(thread_id, None)
            if previous is not None and previous.timer is not None:
                previous.timer.cancel()
            timer = threading.Timer(self._debounce, self._fire, args=(thread_id, pending))
            timer.daemon = True
            timer.name = f"deermem-{thread_id}"
            pending.timer = timer
            self._pending[thread_id] = pending
            timer.start()

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
        with self._lock:
            due = list(self._pending.items())
            self._pending.clear()
            for _, pending in due:
                if pending.timer is not None:
                    pending.timer.cancel()
            running = list(self._running)
        if due:
            worker = threading.Thread(target=self._run_all, args=(due,), name="deermem-flush", daemon=True)
            worker.start()
            running.append(worker)
        for thread in running:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting work, then flush what is pending."""
        with self._lock:
            self._closed = True
        self.flush(timeout)

    # -- worker side -----------------------------------------------------------------------
    def _fire(self, thread_id: str, pending: _Pending) -> None:
        with self._lock:
            if self._pending.get(thread_id) is not pending:
                return  # replaced or flushed meanwhile
            del self._pending[thread_id]
            self._running.add(threading.current_thread())
        try:
            self._extract_once(thread_id, pending)
        finally:
            with self._lock:
                self._running.discard(threading.current_thread())

    def _run_all(self, due: list[tuple[str, _Pending]]) -> None:
        for thread_id, pending in due:
            self._extract_once(thread_id, pending)

    def _extract_once(self, thread_id: str, pending: _Pending) -> None:
        response: str | None = None
        error: BaseException | None = None
        started = time.monotonic()
        # BaseException, not Exception: every terminal path of the provider call must reach
        # the callbacks, including the odd provider SDK that raises a BaseException subclass.
        # This is safe only because it runs on a worker thread (the debounce timer, the flush
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
            logger.warning(
                "memory extraction for thread %s failed: %s: %s", thread_id, type(error).__name__, error
            )
            return
        try:
            facts = parse_facts(response if isinstance(response, str) else str(response))
        except (ValueError, TypeError) as exc:
            logger.warning("memory extraction for thread %s returned no usable facts: %s", thread_id, exc)
            return
        self._remember(thread_id, facts)

    def _report(
        self, pending: _Pending, response: str | None, error: BaseException | None, duration_ms: float
    ) -> None:
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
