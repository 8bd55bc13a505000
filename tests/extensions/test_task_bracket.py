"""``task_bracket``: the one task-lifecycle rule the run worker, the client and subagents share."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.extensions.notifications.lifecycle import task_bracket
from deerflow_ext.extensions.notifications.notification_loop import notification_loop
from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome


@pytest.fixture(autouse=True)
def _inline_notifications() -> Iterator[None]:
    """No registered notification loop: the hooks run inline, in the test's own task."""
    notification_loop.reset()
    yield
    notification_loop.reset()


INFO = TaskInfo(task_id="t-1", run_id="r-1", thread_id="th-1", kind="lead")


class Hooks:
    def __init__(self, *, start: BaseException | None = None, block_start: asyncio.Event | None = None) -> None:
        self.events: list[tuple[str, str | None]] = []
        self.start_error = start
        self.block_start = block_start
        self.started = asyncio.Event()

    async def on_task_start(self, app_store: Any, task_store: Any, info: TaskInfo) -> None:
        self.events.append(("start", None))
        self.started.set()
        if self.block_start is not None:
            await self.block_start.wait()
        if self.start_error is not None:
            raise self.start_error

    async def on_task_stop(self, app_store: Any, task_store: Any, info: TaskInfo, outcome: TaskOutcome) -> None:
        self.events.append(("stop", outcome.value))


def extensions(hooks: Hooks) -> LoadedExtensions:
    return LoadedExtensions(task_lifecycle=(Contribution("acme:install", "acme", 0, "0:acme:install#1", hooks),))


async def test_start_body_stop_and_the_outcome_read_from_how_the_body_ended() -> None:
    for body_raises, expected in ((None, "completed"), (RuntimeError("boom"), "failed")):
        hooks = Hooks()
        ran: list[str] = []
        with pytest.raises(RuntimeError) if body_raises else contextlib.nullcontext():
            async with task_bracket(extensions(hooks), ExtensionData("t-1"), INFO, where="run r-1") as task:
                await task.start()
                ran.append("body")
                assert hooks.events == [("start", None)]  # awaited before the body goes on
                if body_raises is not None:
                    raise body_raises
        assert ran == ["body"] and hooks.events == [("start", None), ("stop", expected)]


async def test_an_outcome_the_body_declares_wins() -> None:
    hooks = Hooks()
    async with task_bracket(extensions(hooks), ExtensionData("t-1"), INFO, where="run r-1") as task:
        await task.start()
        task.outcome = TaskOutcome.FAILED  # caught and persisted by the body, not raised
    assert hooks.events == [("start", None), ("stop", "failed")]


async def test_a_cancelled_body_stops_aborted_and_the_cancellation_goes_on() -> None:
    hooks = Hooks()
    entered = asyncio.Event()

    async def run() -> None:
        async with task_bracket(extensions(hooks), ExtensionData("t-1"), INFO, where="run r-1") as task:
            await task.start()
            entered.set()
            await asyncio.Event().wait()

    running = asyncio.create_task(run())
    await entered.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert hooks.events == [("start", None), ("stop", "aborted")]


async def test_a_task_cancelled_inside_on_task_start_still_gets_on_task_stop() -> None:
    hooks = Hooks(block_start=asyncio.Event())

    async def run() -> None:
        async with task_bracket(extensions(hooks), ExtensionData("t-1"), INFO, where="run r-1") as task:
            await task.start()
            raise AssertionError("the body must not go on after a cancelled start")

    running = asyncio.create_task(run())
    await hooks.started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert hooks.events == [("start", None), ("stop", "aborted")]


async def test_a_process_exit_from_on_task_start_is_contained_and_the_task_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hooks = Hooks(start=SystemExit(7))
    ran = False
    with caplog.at_level(logging.ERROR):
        async with task_bracket(extensions(hooks), ExtensionData("t-1"), INFO, where="run r-1") as task:
            await task.start()
            ran = True
    assert ran and hooks.events == [("start", None), ("stop", "completed")]
    assert any("SystemExit: 7 in run r-1; contained" in record.getMessage() for record in caplog.records)


async def test_nothing_is_notified_without_a_task_store_or_before_start() -> None:
    hooks = Hooks()
    async with task_bracket(extensions(hooks), None, INFO, where="run r-1") as task:
        await task.start()
    async with task_bracket(extensions(hooks), ExtensionData("t-1"), INFO, where="run r-1"):
        pass  # start never attempted: no stop either
    assert hooks.events == []
