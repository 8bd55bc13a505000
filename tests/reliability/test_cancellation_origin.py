"""``extensions.boundary.origin``: the one test of "is this the host's cancellation?" every boundary uses."""

from __future__ import annotations

import asyncio
import threading

from deerflow_ext.extensions.boundary.origin import host_is_cancelling, is_host_cancellation


def test_no_running_task_is_never_the_host() -> None:
    assert host_is_cancelling() is False
    assert is_host_cancellation(asyncio.CancelledError()) is False


async def test_self_raised_cancel_is_not_the_host() -> None:
    try:
        raise asyncio.CancelledError("own timeout")
    except asyncio.CancelledError as exc:
        assert is_host_cancellation(exc) is False


async def test_a_real_cancel_of_the_task_is_the_host() -> None:
    seen: list[bool] = []

    async def victim() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError as exc:
            seen.append(is_host_cancellation(exc))
            raise

    task = asyncio.create_task(victim())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == [True]


async def test_asyncio_timeout_uncancels_so_later_own_cancels_are_contained() -> None:
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(1)
    except TimeoutError:
        pass
    assert host_is_cancelling() is False
    assert is_host_cancellation(asyncio.CancelledError()) is False


def test_other_exceptions_are_never_host_cancellations() -> None:
    assert is_host_cancellation(RuntimeError("x")) is False
    assert is_host_cancellation(KeyboardInterrupt()) is False


def test_worker_thread_has_no_host_task() -> None:
    out: list[bool] = []
    thread = threading.Thread(target=lambda: out.append(host_is_cancelling()))
    thread.start()
    thread.join()
    assert out == [False]
