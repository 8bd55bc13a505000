"""The notification loop: cross-loop dispatch, fire-and-forget intake, shutdown order."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.extensions.notifications.lifecycle import notify_task_start, notify_task_stop
from deerflow_ext.extensions.notifications.notification_loop import NotificationLoop, notification_loop
from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

LOGGER = "deerflow_ext.extensions"
INFO = TaskInfo(task_id="sub-1", run_id="r-1", thread_id="th-1", kind="subagent", parent_task_id="lead-1")


@pytest.fixture(autouse=True)
def _fresh_notification_loop() -> Any:
    notification_loop.reset()
    yield
    notification_loop.reset()


def lifecycle(*objects: object) -> LoadedExtensions:
    return LoadedExtensions(
        task_lifecycle=tuple(
            Contribution(f"ext{i}:install", f"ext{i}", i, f"{i}:ext{i}:install#1", obj) for i, obj in enumerate(objects)
        )
    )


class WhereAmI:
    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.threads: list[threading.Thread] = []

    async def on_task_start(self, *args: Any) -> None:
        self.loops.append(asyncio.get_running_loop())
        self.threads.append(threading.current_thread())

    async def on_task_stop(self, *args: Any) -> None:
        self.loops.append(asyncio.get_running_loop())


def run_in_thread(coro_factory: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``coro_factory()`` on a second event loop in another thread, as a subagent does."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        async def main() -> None:
            outcome["loop"] = asyncio.get_running_loop()
            try:
                outcome["result"] = await coro_factory()
            except BaseException as exc:
                outcome["error"] = exc

        asyncio.run(main())

    thread = threading.Thread(target=target, name="subagent-loop")
    thread.start()
    return thread, outcome


async def test_a_notification_from_another_loop_runs_on_the_registered_loop() -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)
    probe = WhereAmI()
    ext = lifecycle(probe)

    async def subagent() -> None:
        await notify_task_start(ext, ExtensionData("call-1"), INFO)
        await notify_task_stop(ext, ExtensionData("call-1"), INFO, TaskOutcome.COMPLETED)

    thread, outcome = run_in_thread(subagent)
    await asyncio.to_thread(thread.join, 5)
    assert "error" not in outcome
    assert outcome["loop"] is not gateway_loop
    assert probe.loops == [gateway_loop, gateway_loop]
    assert probe.threads == [threading.current_thread()]


async def test_without_a_registered_loop_the_notification_runs_on_the_callers_loop() -> None:
    probe = WhereAmI()
    thread, outcome = run_in_thread(lambda: notify_task_start(lifecycle(probe), ExtensionData("t"), INFO))
    await asyncio.to_thread(thread.join, 5)
    assert "error" not in outcome
    assert probe.loops == [outcome["loop"]]


async def test_cancelling_the_remote_caller_cancels_the_notification_on_the_registered_loop() -> None:
    notification_loop.register(asyncio.get_running_loop())
    entered, cancelled = threading.Event(), threading.Event()
    calls: list[str] = []

    class Blocks:
        async def on_task_start(self, *args: Any) -> None:
            calls.append("blocks")
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    class Later:
        async def on_task_start(self, *args: Any) -> None:
            calls.append("later")

    ext = lifecycle(Blocks(), Later())

    async def subagent() -> None:
        task = asyncio.create_task(notify_task_start(ext, ExtensionData("t"), INFO))
        await asyncio.to_thread(entered.wait, 5)
        task.cancel()
        await task

    thread, outcome = run_in_thread(subagent)
    await asyncio.to_thread(thread.join, 5)
    await asyncio.to_thread(cancelled.wait, 5)
    assert isinstance(outcome.get("error"), asyncio.CancelledError)
    assert cancelled.is_set()
    await asyncio.sleep(0.01)  # a window for a (wrongly) notified "later": nothing to wait on
    assert calls == ["blocks"]


async def test_run_returns_the_value_across_loops() -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)

    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    thread, outcome = run_in_thread(lambda: notification_loop.run(where))
    await asyncio.to_thread(thread.join, 5)
    assert outcome["result"] is gateway_loop


async def test_submit_without_a_loop_is_dropped_with_a_debug_line(caplog: pytest.LogCaptureFixture) -> None:
    created: list[str] = []

    async def work() -> None:
        created.append("ran")

    def factory() -> Any:
        created.append("created")
        return work()

    with caplog.at_level(logging.DEBUG, LOGGER):
        assert notification_loop.submit(factory, what="compaction observation") is False
    assert created == [], "a dropped observation never creates its coroutine"
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG] == [
        "no notification loop registered; dropping compaction observation"
    ]
    assert notification_loop.accepting is False


async def test_submit_runs_the_work_on_the_registered_loop_and_drain_waits_for_it() -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)
    ran: list[asyncio.AbstractEventLoop] = []

    async def work() -> None:
        await asyncio.sleep(0.05)
        ran.append(asyncio.get_running_loop())

    assert notification_loop.submit(work) is True
    assert ran == [], "submit does not wait"
    await notification_loop.drain(2.0)
    assert ran == [gateway_loop]


async def test_submit_from_a_plain_worker_thread_runs_on_the_registered_loop() -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)
    ran: list[asyncio.AbstractEventLoop] = []

    async def work() -> None:
        ran.append(asyncio.get_running_loop())

    accepted = await asyncio.to_thread(notification_loop.submit, work)
    assert accepted is True
    await notification_loop.drain(2.0)
    assert ran == [gateway_loop]


async def test_close_intake_drops_fire_and_forget_work_but_awaited_work_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)
    notification_loop.close_intake()
    assert notification_loop.accepting is False
    assert notification_loop.loop is gateway_loop, "the loop stays until in-flight runs drained"

    async def work() -> str:
        return "ran"

    with caplog.at_level(logging.DEBUG, LOGGER):
        assert notification_loop.submit(work, what="memory observation") is False
    assert "dropping memory observation" in caplog.text
    probe = WhereAmI()
    await notify_task_stop(lifecycle(probe), ExtensionData("t"), INFO, TaskOutcome.ABORTED)
    assert probe.loops == [gateway_loop]
    assert await notification_loop.run(work) == "ran"


async def test_drain_gives_up_at_its_timeout_without_cancelling_the_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    notification_loop.register(asyncio.get_running_loop())
    release = asyncio.Event()
    finished: list[str] = []

    async def slow() -> None:
        await release.wait()
        finished.append("done")

    notification_loop.submit(slow)
    with caplog.at_level(logging.WARNING, LOGGER):
        await notification_loop.drain(0.05)
    assert finished == []
    assert "still running after the 0.05s drain" in caplog.text
    release.set()
    await notification_loop.drain(1.0)
    assert finished == ["done"]


async def test_a_failing_submission_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    notification_loop.register(asyncio.get_running_loop())

    async def broken() -> None:
        raise RuntimeError("wrapper bug")

    with caplog.at_level(logging.ERROR, LOGGER):
        assert notification_loop.submit(broken) is True
        await notification_loop.drain(1.0)
    assert "fire-and-forget notification failed: RuntimeError: wrapper bug" in caplog.text


async def test_register_reset_and_the_in_flight_set_keeps_tasks_alive() -> None:
    loop = NotificationLoop()
    assert loop.loop is None and not loop.accepting
    running = asyncio.get_running_loop()
    loop.register(running)
    assert loop.loop is running and loop.accepting
    gate = asyncio.Event()

    async def waits() -> None:
        await gate.wait()

    assert loop.submit(waits)
    await asyncio.sleep(0)
    assert len(loop._inflight) == 1
    gate.set()
    await loop.drain(1.0)
    assert not loop._inflight
    loop.close_intake()
    loop.register(running)
    assert loop.accepting, "registering again reopens intake"
    loop.reset()
    assert loop.loop is None


async def test_a_closed_registered_loop_drops_submissions() -> None:
    other = asyncio.new_event_loop()
    other.close()
    notification_loop.register(other)

    async def work() -> None:
        return None

    assert notification_loop.submit(work) is False
