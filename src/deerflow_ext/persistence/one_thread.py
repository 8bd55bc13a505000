"""One thread that runs blocking calls in turn, awaited from any event loop.

The checkpointer's SQLite connection lives on such a thread (``sqlite_saver``). It is the
cheapest hand-off we measured: ``loop.run_in_executor`` on a one-worker
``ThreadPoolExecutor`` cost the event loop ~50 us a call (a ``concurrent.futures`` future,
its work item, the executor's thread accounting, and ``wrap_future`` chaining the two
futures across threads), a plain queue and ``call_soon_threadsafe`` back ~19 us (uvloop).
That is also how aiosqlite hands over each of its calls, so one call here costs what one
aiosqlite hop did.

A SQLite connection's thread is *loop-first* (``loop_first``): a call is made right where it
is awaited, on the event loop, whenever nothing handed to the thread is queued or running,
and handed over only otherwise, or when it found the database locked by another connection.
A SQLite statement here takes microseconds and syncs nothing to disk (WAL, ``synchronous``
NORMAL), while a hand-off costs the loop a wake-up and the thread a wait for the GIL after
every statement: at 32 clients the checkpointer's and the store's threads were busy half
the time, mostly waiting for the GIL the loop held, and the runs queued behind them while
the loop idled 15-24% of the time (made on the loop: 1.16x, 1.03x and 1.07x the
runs per second at 1, 8 and 32 clients, against handing over, side by side).

The wait for a lock is what must not happen on the loop (an async-engine transaction
holding it would need the loop to finish): such a connection waits for no lock (busy
timeout 0), the call that meets one goes to the thread, and the thread retries it until the
lock is free, for up to ``patience`` seconds, as SQLite's own busy timeout would have
waited. What the loop does pay: the commit that starts the WAL over syncs its header, about
once a second; the WAL's checkpoints are a thread's (``wal_checkpoints``).

Calls handed over with :meth:`OneThread.run_batched` that wait next to each other in the
queue are made as one call of their batch function: the PostgreSQL checkpointer sends the
writes of every operation waiting on its connection in one round trip (``pg_saver``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["BATCH_LIMIT", "Batch", "Busy", "OneThread", "Outcome"]

T = TypeVar("T")

BATCH_LIMIT = 64
"""The most waiting calls one batch takes: the first of them waits for all of them."""

Outcome = tuple[Any, "BaseException | None"]
"""A batched call's result, or its exception (then the result is ``None``)."""

Batch = Callable[[list[Any]], Sequence[Outcome]]
"""Makes several batched calls at once: their items in, one :data:`Outcome` each out, in order."""

Busy = Callable[[BaseException], bool]
"""Whether a call's exception means "another connection holds the lock": try again later."""

_FIRST_PAUSE = 0.001
_LONGEST_PAUSE = 0.05
"""A busy call's retries on the thread wait 1 ms, then twice as long each time, up to 50 ms."""

# A job handed over by run() or run_batched(): (loop, future, fn, args, kwargs, batched).
# One with no loop (close's ``last``) has nobody waiting. A batched job's fn is its Batch and
# its args the one item.
_Job = tuple[
    asyncio.AbstractEventLoop | None,
    "asyncio.Future[Any] | None",
    Callable[..., Any],
    tuple[Any, ...],
    dict[str, Any],
    bool,
]
_NO_KWARGS: dict[str, Any] = {}
_FETCH: Any = object()  # _serve: nothing taken from the queue yet


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the caller stopped waiting; the call itself has run
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _settle_all(settled: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in settled:
        _settle(future, result, error)


class OneThread:
    """A daemon thread running the calls handed to :meth:`run` one at a time, in order (a
    connection's operations need their order: the checkpointer keeps one thread per
    connection).

    With ``loop_first``, calls are made where they are awaited whenever
    nothing handed over is queued or running, and a call that raises what ``loop_first``
    calls busy is handed over and retried there for up to ``patience`` seconds (the module
    docstring says why). Calls from one loop still start in the order they were made, and
    no two calls are ever made at once.

    Daemon, so a process that never reaches :meth:`close` (a crash, a lost lifespan) is
    not held open by it; what it abandons then is what any crash abandons.
    """

    def __init__(self, name: str, *, loop_first: Busy | None = None, patience: float = 0.0) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._intake = threading.Lock()  # no call is queued behind the closing marker
        self._busy = loop_first
        self._patience = patience
        # Loop-first: calls handed over and not yet made, or the one call being made where it
        # was awaited (then 1). Guarded by _intake.
        self._outstanding = 0
        # Loop-first: held by whoever is making a call, so the connection has one user.
        self._using: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if loop_first is not None else contextlib.nullcontext()
        )
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        """The thread's id (tests check where calls ran)."""
        return self._thread.ident

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the thread; its result or its exception, here.

        Cancelling the awaiting task does not stop a call the thread has taken: like
        ``run_in_executor``, it runs to its end and its result is dropped.

        Loop-first, the call is made here when nothing handed over is waiting or running
        (so a loop's calls still start in the order it made them), and handed over when
        something is, or when it raised what ``loop_first`` calls busy.
        """
        if self._busy is not None and self._claim():
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                if not self._busy(exc):
                    raise
            finally:
                self._release()
        return await self._hand_over(fn, args, kwargs, False)

    async def run_aside(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` always on the thread, never where it is awaited, even on a
        loop-first thread: for a call whose size a client sets (a search over every item, a
        thread's whole history), which made where it was awaited would stall every other
        request of the loop for as long as it takes. It keeps its place among the calls
        handed over, as :meth:`run`'s do."""
        return await self._hand_over(fn, args, kwargs, False)

    def _hand_over(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], batched: bool
    ) -> asyncio.Future[T]:
        """Queue a call for the thread: the future its outcome is set on, on this loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._intake:
            if self._closed:
                raise RuntimeError(f"{self._thread.name} is closed")
            self._outstanding += 1
            self._jobs.put((loop, future, fn, args, kwargs, batched))
        return future

    def _claim(self) -> bool:
        """Loop-first: take the connection for a call made here, if nothing else has it."""
        with self._intake:
            if self._outstanding or self._closed:
                return False
            self._outstanding = 1
        self._using.__enter__()  # free: the thread let go before its last call counted out
        return True

    def _release(self) -> None:
        self._using.__exit__(None, None, None)
        with self._intake:
            self._outstanding -= 1

    async def run_batched(self, batch: Batch, item: Any) -> Any:
        """``batch([item, ...])``'s outcome for ``item``, here.

        Batched calls with the same ``batch`` (the same object) that wait next to each other
        in the queue, up to :data:`BATCH_LIMIT`, are made as one call of it; any other call
        between them ends the batch, so every call still starts in the order it was handed
        over. A batch that raises fails each of its calls with that exception.
        """
        return await self._hand_over(batch, (item,), _NO_KWARGS, True)

    def close(self, *, last: Callable[[], Any] | None = None, wait: bool = True) -> None:
        """Run what was handed over, then ``last`` (if given), then end the thread; with
        ``wait`` (the default) block until it has ended.

        ``wait=False`` is for a finalizer: it may run inside the garbage collector on any
        thread, the event loop's included, which must not wait for the thread's last work
        (closing a SQLite connection can checkpoint the WAL to disk)."""
        with self._intake:
            if not self._closed:
                self._closed = True
                if last is not None:
                    self._jobs.put((None, None, last, (), _NO_KWARGS, False))
                self._jobs.put(None)
        if wait:
            if self._thread is not threading.current_thread():
                self._thread.join()

    def _serve(self) -> None:
        job = self._jobs.get()
        while job is not None:
            if not job[5]:
                self._run_one(job)
                del job  # nothing of a finished call is kept alive while the thread waits
                job = self._jobs.get()
                continue
            group = [job]
            job = waiting = _FETCH
            while len(group) < BATCH_LIMIT:
                try:
                    waiting = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if waiting is not None and waiting[5] and waiting[2] is group[0][2]:
                    group.append(waiting)
                else:  # runs after the batch: the order calls start in is kept
                    job = waiting
                    break
            self._run_group(group)
            del group, waiting
            if job is _FETCH:
                job = self._jobs.get()

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``fn`` on the thread; loop-first, again while it finds the database busy, with
        growing pauses, until ``patience`` runs out (then its last exception)."""
        if self._busy is None:
            return fn(*args, **kwargs)
        deadline = time.monotonic() + self._patience
        pause = _FIRST_PAUSE
        while True:
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                left = deadline - time.monotonic()
                if not self._busy(exc) or left <= 0:
                    raise
            time.sleep(min(pause, left))
            pause = min(2 * pause, _LONGEST_PAUSE)

    def _run_one(self, job: _Job) -> None:
        loop, future, fn, args, kwargs, _ = job
        result: Any = None
        error: BaseException | None = None
        with self._using:
            try:
                result = self._call(fn, args, kwargs)
            except BaseException as exc:  # delivered to the caller, whatever it is
                error = exc
        if loop is None or future is None:  # close's last job: nobody is waiting
            return
        if self._busy is not None:  # only a loop-first thread reads the count
            with self._intake:
                self._outstanding -= 1
        try:
            loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:  # the caller's loop is closed: nobody is waiting
            pass

    def _run_group(self, group: list[_Job]) -> None:
        batch = group[0][2]
        outcomes: Sequence[Outcome]
        with self._using:
            try:
                outcomes = self._call(batch, ([job[3][0] for job in group],), _NO_KWARGS)
                if len(outcomes) != len(group):
                    raise RuntimeError(f"{batch!r} answered {len(outcomes)} outcomes for {len(group)} calls")
            except BaseException as exc:  # every call of the batch gets it
                outcomes = [(None, exc)] * len(group)
        if self._busy is not None:
            with self._intake:
                self._outstanding -= len(group)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for job, (result, error) in zip(group, outcomes, strict=True):
            loop, future = job[0], job[1]
            if loop is not None and future is not None:
                by_loop.setdefault(loop, []).append((future, result, error))
        for loop, settled in by_loop.items():  # one wake-up per waiting loop
            try:
                loop.call_soon_threadsafe(_settle_all, settled)
            except RuntimeError:  # that loop is closed: nobody is waiting
                pass
