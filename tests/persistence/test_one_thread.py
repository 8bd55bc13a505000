"""``OneThread``: blocking calls run in turn on one thread, awaited from any event loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deerflow_ext.persistence.one_thread import BATCH_LIMIT, OneThread


@pytest.fixture
def worker() -> Iterator[OneThread]:
    thread = OneThread("test-one-thread")
    try:
        yield thread
    finally:
        thread.close()


async def test_calls_run_on_the_one_thread_in_the_order_handed_over(worker: OneThread) -> None:
    seen: list[tuple[int, int]] = []

    def record(n: int) -> int:
        seen.append((n, threading.get_ident()))
        return n * 2

    results = await asyncio.gather(*(worker.run(record, n) for n in range(50)))
    assert results == [n * 2 for n in range(50)]
    assert [n for n, _ in seen] == list(range(50))
    assert {ident for _, ident in seen} == {worker.ident} and worker.ident != threading.get_ident()


async def test_keyword_arguments_and_exceptions_reach_the_caller(worker: OneThread) -> None:
    assert await worker.run(dict, a=1) == {"a": 1}
    with pytest.raises(ZeroDivisionError):
        await worker.run(lambda: 1 / 0)

    def interrupt() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # delivered, and the thread survives it
        await worker.run(interrupt)
    assert await worker.run(int, "7") == 7


def test_callers_on_several_loops_each_get_their_own_results(worker: OneThread) -> None:
    results: dict[int, list[int]] = {}

    def loop_thread(k: int) -> None:
        async def calls() -> list[int]:
            return [await worker.run(lambda n=n: n + k * 100) for n in range(30)]

        results[k] = asyncio.run(calls())

    threads = [threading.Thread(target=loop_thread, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {k: [n + k * 100 for n in range(30)] for k in range(3)}


async def test_a_cancelled_caller_leaves_the_call_to_finish_and_the_thread_going(worker: OneThread) -> None:
    started, done = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.2)
        done.set()
        return "late"

    task = asyncio.ensure_future(worker.run(slow))
    await asyncio.to_thread(started.wait)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await worker.run(str, "next") == "next"
    assert done.is_set()


async def test_close_runs_what_was_handed_over_then_refuses_more() -> None:
    worker = OneThread("test-close")
    pending = asyncio.ensure_future(worker.run(time.sleep, 0.05))
    await asyncio.sleep(0)
    await asyncio.to_thread(worker.close)
    await pending
    with pytest.raises(RuntimeError, match="closed"):
        await worker.run(int)
    worker.close()  # twice is fine


def test_a_finalizer_close_hands_over_its_last_work_without_waiting_for_it() -> None:
    worker = OneThread("test-last")
    release, ran = threading.Event(), []

    def last() -> None:
        release.wait(5)
        ran.append(threading.get_ident())

    start = time.monotonic()
    worker.close(last=last, wait=False)
    assert time.monotonic() - start < 1 and not ran  # returned while `last` still waits
    release.set()
    worker._thread.join(5)
    assert ran == [worker.ident]


async def _busy(worker: OneThread) -> tuple[asyncio.Future[Any], threading.Event]:
    """The worker's thread kept busy until the event is set, so calls handed over meanwhile
    wait in its queue; the future is that busy call's."""
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(5)

    held = asyncio.ensure_future(worker.run(hold))
    await asyncio.to_thread(started.wait, 5)
    return held, release


async def test_batched_calls_waiting_next_to_each_other_are_one_call_and_any_other_call_ends_the_batch(
    worker: OneThread,
) -> None:
    batches: list[list[object]] = []
    order: list[object] = []

    def double(items: list[int]) -> list[tuple[object, BaseException | None]]:
        batches.append(list(items))
        order.extend(items)
        return [(None, ValueError(n)) if n == 3 else (n * 2, None) for n in items]

    def other(items: list[int]) -> list[tuple[object, BaseException | None]]:
        batches.append(["other", *items])
        return [(n, None) for n in items]

    held, release = await _busy(worker)
    # Queued while the thread is busy: 0 1 2 3 | plain | 4 5 | other 6 | 7
    calls = [asyncio.ensure_future(worker.run_batched(double, n)) for n in range(4)]
    await asyncio.sleep(0)
    plain = asyncio.ensure_future(worker.run(order.append, "plain"))
    await asyncio.sleep(0)
    calls += [asyncio.ensure_future(worker.run_batched(double, n)) for n in (4, 5)]
    await asyncio.sleep(0)
    elsewhere = asyncio.ensure_future(worker.run_batched(other, 6))
    await asyncio.sleep(0)
    calls.append(asyncio.ensure_future(worker.run_batched(double, 7)))
    await asyncio.sleep(0.05)
    release.set()
    await held
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert [n for n in outcomes if not isinstance(n, BaseException)] == [0, 2, 4, 8, 10, 14]
    assert isinstance(outcomes[3], ValueError)  # the one failed call fails alone
    assert await plain is None and await elsewhere == 6
    assert batches == [[0, 1, 2, 3], [4, 5], ["other", 6], [7]]
    assert order == [0, 1, 2, 3, "plain", 4, 5, 7]


async def test_a_batch_that_raises_or_miscounts_fails_each_of_its_calls(worker: OneThread) -> None:
    def broken(items: list[int]) -> list[tuple[object, BaseException | None]]:
        raise KeyError("batch")

    def short(items: list[int]) -> list[tuple[object, BaseException | None]]:
        return []

    with pytest.raises(KeyError):
        await worker.run_batched(broken, 1)
    with pytest.raises(RuntimeError, match="0 outcomes for 1 calls"):
        await worker.run_batched(short, 1)
    assert await worker.run(int, "3") == 3  # the thread carries on


async def test_a_batch_takes_at_most_the_limit_and_close_after_batched_calls_still_runs_them() -> None:
    worker = OneThread("test-batch-limit")
    sizes: list[int] = []

    def count(items: list[int]) -> list[tuple[object, BaseException | None]]:
        sizes.append(len(items))
        return [(n, None) for n in items]

    held, release = await _busy(worker)
    calls = [asyncio.ensure_future(worker.run_batched(count, n)) for n in range(BATCH_LIMIT + 6)]
    await asyncio.sleep(0.05)
    closing = asyncio.ensure_future(asyncio.to_thread(worker.close))
    await asyncio.sleep(0.05)
    release.set()
    await held
    assert await asyncio.gather(*calls) == list(range(BATCH_LIMIT + 6))
    await closing
    assert sizes == [BATCH_LIMIT, 6]
    assert not worker._thread.is_alive()


class _Locked(Exception):
    """What the loop-first tests' calls raise while "another connection holds the lock"."""


def _loop_first(patience: float = 5.0) -> OneThread:
    return OneThread("test-loop-first", loop_first=lambda exc: isinstance(exc, _Locked), patience=patience)


async def test_loop_first_a_call_is_made_where_it_is_awaited_when_nothing_is_handed_over() -> None:
    worker = _loop_first()
    try:
        assert await worker.run(threading.get_ident) == threading.get_ident()
        with pytest.raises(ZeroDivisionError):  # its own exceptions reach the caller as they are
            await worker.run(lambda: 1 / 0)
        assert await worker.run(threading.get_ident) == threading.get_ident()
    finally:
        worker.close()


async def test_loop_first_calls_wait_behind_a_handed_over_one_and_keep_their_order() -> None:
    worker = _loop_first()
    release, locked = threading.Event(), [True]
    seen: list[tuple[int, int]] = []

    def held_by_another() -> None:  # busy on the loop: goes to the thread, which waits there
        if locked[0]:
            raise _Locked
        seen.append((-1, threading.get_ident()))

    def record(n: int) -> None:
        seen.append((n, threading.get_ident()))

    try:
        first = asyncio.ensure_future(worker.run(held_by_another))
        await asyncio.sleep(0.05)  # the thread is retrying it; the loop is free meanwhile
        later = asyncio.ensure_future(asyncio.gather(*(worker.run(record, n) for n in range(10))))
        await asyncio.sleep(0.05)
        assert not first.done() and not later.done() and not seen
        locked[0] = False
        release.set()
        await asyncio.wait_for(asyncio.gather(first, later), 5)
        assert [n for n, _ in seen] == [-1, *range(10)]
        assert {ident for _, ident in seen} == {worker.ident}
        assert await worker.run(threading.get_ident) == threading.get_ident()  # idle again: here
    finally:
        worker.close()


async def test_loop_first_a_call_busy_past_its_patience_fails_with_the_lock_error() -> None:
    worker = _loop_first(patience=0.2)
    tries: list[int] = []

    def always_locked() -> None:
        tries.append(threading.get_ident())
        raise _Locked

    try:
        start = time.monotonic()
        with pytest.raises(_Locked):
            await worker.run(always_locked)
        assert 0.2 <= time.monotonic() - start < 2
        assert tries[0] == threading.get_ident() and set(tries[1:]) == {worker.ident} and len(tries) > 3
    finally:
        worker.close()


def test_loop_first_the_thread_never_makes_a_call_while_one_is_being_made_elsewhere() -> None:
    """Callers on several loops: one makes its call where it is, the others' go to the
    thread meanwhile; one connection is never used by two threads at once."""
    worker = _loop_first()
    inside, overlaps = [0], []
    guard = threading.Lock()

    def use(n: int) -> int:
        with guard:
            inside[0] += 1
            overlaps.append(inside[0])
        time.sleep(0.002)
        with guard:
            inside[0] -= 1
        return n

    results: dict[int, list[int]] = {}

    def loop_thread(k: int) -> None:
        async def calls() -> list[int]:
            return [await worker.run(use, n) for n in range(25)]

        results[k] = asyncio.run(calls())

    threads = [threading.Thread(target=loop_thread, args=(k,)) for k in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        worker.close()
    assert results == {k: list(range(25)) for k in range(4)}
    assert max(overlaps) == 1
