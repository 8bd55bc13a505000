"""The memory watchdog names the extension hook running when RSS passes the bound: one
blocking the loop (its frame on the loop thread's stack) and one awaiting while it holds the
memory (found on its task's chain of awaits); nothing more until RSS falls back."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from deerflow_ext.extensions.boundary.loopwatch import RunningHook, register_site
from deerflow_ext.extensions.boundary.memwatch import MemoryWatchdog, resident_mib

MIB = 1 << 20


def _filled(size: int) -> bytes:
    return b"\x01" * size  # written, so resident


def hog_site(hold: float) -> None:
    block = _filled(120 * MIB)
    time.sleep(hold)  # the loop is blocked: the frame is on its stack
    del block


async def ahog_site(hold: float, filled: asyncio.Event) -> None:
    # Filled off the loop: filling 120 MiB on it takes long enough on a loaded machine for the
    # watchdog to see the hook *running*, which is not the case this site stands for. The test
    # arms the watchdog only once ``filled`` is set, while this frame is suspended: a sample
    # taken as the coroutine resumes after the fill would see it running too.
    block = await asyncio.to_thread(_filled, 120 * MIB)
    filled.set()
    await asyncio.sleep(hold)  # the loop is free: the hook waits on its task's chain
    del block


register_site(hog_site, lambda frame: RunningHook("hog_ext:install", "before_model"))
register_site(ahog_site, lambda frame: RunningHook("hog_ext:install", "abefore_model"))


def _named(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "when the Gateway's memory reached" in r.getMessage()]


@pytest.mark.parametrize("awaiting", [False, True], ids=["blocking", "awaiting"])
async def test_the_hook_holding_the_memory_is_named_once(caplog: pytest.LogCaptureFixture, awaiting: bool) -> None:
    caplog.set_level(logging.WARNING, logger="deerflow_ext.extensions")
    watchdog = MemoryWatchdog(asyncio.get_running_loop(), resident_mib() + 60, interval=0.05)
    try:
        if awaiting:
            filled = asyncio.Event()
            hog = asyncio.create_task(ahog_site(0.6, filled))
            await filled.wait()
            watchdog.start()  # past the bound from its first look, the hook suspended
            await hog
        else:
            watchdog.start()
            hog_site(0.6)
        await asyncio.sleep(0.3)  # the loop answers the watchdog's look at the tasks
    finally:
        watchdog.stop()
    said = "abefore_model was awaiting" if awaiting else "before_model was running"
    assert _named(caplog) == [_named(caplog)[0]] and f"hog_ext:install: {said}" in _named(caplog)[0]


async def test_below_the_bound_nothing_is_said(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = MemoryWatchdog(asyncio.get_running_loop(), resident_mib() + 500, interval=0.05)
    watchdog.start()
    try:
        hog_site(0.3)
    finally:
        watchdog.stop()
    assert _named(caplog) == []
