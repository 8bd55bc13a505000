"""``_notify_each`` and the lifecycle notifications: order, isolation, budget, origin."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.extensions.notifications import lifecycle as lifecycle_module
from deerflow_ext.extensions.notifications import notify, notify_plans
from deerflow_ext.extensions.notifications.lifecycle import notify_task_start, notify_task_stop
from deerflow_ext.extensions.notifications.notification_loop import notification_loop
from deerflow_ext.testing import wait_until
from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

LOGGER = "deerflow_ext.extensions"
INFO = TaskInfo(task_id="7f3c", run_id="r-1", thread_id="th-1", kind="lead")


@pytest.fixture(autouse=True)
def _no_notification_loop() -> Any:
    notification_loop.reset()
    yield
    notification_loop.reset()


def contributions(*objects: object) -> tuple[Contribution[Any], ...]:
    names = ("acme_audit", "acme_costs", "acme_trace", "acme_four", "acme_five")
    return tuple(
        Contribution(f"{names[i]}:install", names[i], i, f"{i}:{names[i]}:install#1", obj)
        for i, obj in enumerate(objects)
    )


def lifecycle(*objects: object) -> LoadedExtensions:
    return LoadedExtensions(task_lifecycle=contributions(*objects))


class Recorder:
    """A contributor whose ``on_task_start`` does ``behaviour`` and records the call."""

    def __init__(self, calls: list[str], name: str, behaviour: str = "return") -> None:
        self.calls, self.name, self.behaviour = calls, name, behaviour

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        self.calls.append(self.name)
        if self.behaviour == "raise":
            raise ValueError(f"broken {self.name}")
        if self.behaviour == "sleep":
            await asyncio.sleep(30)
        if self.behaviour == "self_cancel":
            raise asyncio.CancelledError()
        if self.behaviour == "block":
            await asyncio.Event().wait()

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        self.calls.append(f"stop:{self.name}:{outcome.value}")


async def stop_in_the_cleanup_of_a_cancelled_run(ext: LoadedExtensions) -> None:
    """A run cancelled while it waits notifies ``on_task_stop`` in its cleanup, then re-raises."""

    waiting = asyncio.Event()

    async def run() -> None:
        try:
            waiting.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await notify_task_stop(ext, ExtensionData("t"), INFO, TaskOutcome.ABORTED)
            raise

    task = asyncio.create_task(run())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def messages(caplog: pytest.LogCaptureFixture, level: int | None = None) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and (level is None or r.levelno == level)]


async def test_contributors_run_in_registration_order_and_failures_do_not_skip_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    ext = lifecycle(Recorder(calls, "a"), Recorder(calls, "b", "raise"), Recorder(calls, "c"))
    with caplog.at_level(logging.INFO, LOGGER):
        await notify_task_start(ext, ExtensionData("7f3c"), INFO)
    assert calls == ["a", "b", "c"]
    assert messages(caplog, logging.ERROR) == [
        "Extension acme_costs:install: on_task_start raised ValueError: broken b"
    ]
    assert len(ext.diagnostics) == 0, "lifecycle failures are logged, not listed"


async def test_every_contributor_receives_the_app_store_the_task_store_and_the_info() -> None:
    seen: list[tuple[Any, ...]] = []

    class Capture:
        async def on_task_start(self, *args: Any) -> None:
            seen.append(args)

        async def on_task_stop(self, *args: Any) -> None:
            seen.append(args)

    ext = lifecycle(Capture(), Capture())
    store = ExtensionData("7f3c")
    await notify_task_start(ext, store, INFO)
    await notify_task_stop(ext, store, INFO, TaskOutcome.COMPLETED)
    assert seen == [(ext.app_store, store, INFO)] * 2 + [(ext.app_store, store, INFO, TaskOutcome.COMPLETED)] * 2


async def test_a_contributor_without_the_hook_is_skipped_silently(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    class StopOnly:
        async def on_task_stop(self, *args: Any) -> None:
            calls.append("stop-only")

    ext = lifecycle(StopOnly(), Recorder(calls, "b"))
    with caplog.at_level(logging.DEBUG, LOGGER):
        await notify_task_start(ext, ExtensionData("t"), INFO)
        await notify_task_stop(ext, ExtensionData("t"), INFO, TaskOutcome.ABORTED)
    assert calls == ["b", "stop-only", "stop:b:aborted"]
    assert messages(caplog) == []


async def test_no_lifecycle_contributors_returns_without_touching_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("dispatched although nobody listens")

    monkeypatch.setattr(lifecycle_module, "_notify_each", forbidden)
    monkeypatch.setattr(notification_loop, "run", forbidden)
    await notify_task_start(LoadedExtensions(), ExtensionData("t"), INFO)
    await notify_task_stop(LoadedExtensions(), ExtensionData("t"), INFO, TaskOutcome.FAILED)


async def test_budget_cancels_the_running_contributor_and_skips_the_rest_with_the_spec_lines(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "DEFAULT_NOTIFY_BUDGET", 0.1)
    calls: list[str] = []
    ext = lifecycle(Recorder(calls, "a"), Recorder(calls, "b", "sleep"), Recorder(calls, "c"), Recorder(calls, "d"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    with caplog.at_level(logging.WARNING, LOGGER):
        await notify_task_start(ext, ExtensionData("t"), INFO)
    elapsed = loop.time() - started
    assert calls == ["a", "b"]
    assert 0.09 <= elapsed < 0.5
    assert messages(caplog, logging.WARNING) == [
        "Extension acme_costs:install: on_task_start timed out for task 7f3c; the 0.1s notification budget was spent",
        "Extension acme_trace:install: on_task_start skipped for task 7f3c; the 0.1s notification budget was spent",
        "Extension acme_four:install: on_task_start skipped for task 7f3c; the 0.1s notification budget was spent",
    ]
    # The spent budget is not a cancellation of the caller: it can keep awaiting.
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # an await point: a leftover cancel would be delivered here


def test_the_default_budget_prints_as_the_spec_does() -> None:
    assert notify.DEFAULT_NOTIFY_BUDGET == 3.0
    assert notify._seconds(notify.DEFAULT_NOTIFY_BUDGET) == "3.0s"
    assert notify._seconds(3) == "3.0s"


async def test_budget_is_shared_by_all_contributors_not_per_contributor() -> None:
    calls: list[str] = []

    class Takes:
        def __init__(self, name: str) -> None:
            self.name = name

        async def on_task_start(self, *args: Any) -> None:
            calls.append(self.name)
            await asyncio.sleep(0.15)  # the behaviour: each takes more than half the budget
            calls.append(f"{self.name} done")

    # 0.1 s of slack either way: "a" ends well inside the budget, "b" cannot end inside it.
    await notify_task_start(lifecycle(Takes("a"), Takes("b"), Takes("c")), ExtensionData("t"), INFO, budget=0.25)
    assert calls == ["a", "a done", "b"]


async def test_start_and_stop_each_get_their_own_budget(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    class SlowStart(Recorder):
        async def on_task_start(self, *args: Any) -> None:
            calls.append("slow start")
            await asyncio.sleep(30)

    ext = lifecycle(SlowStart(calls, "a"), Recorder(calls, "b"))
    store = ExtensionData("t")
    with caplog.at_level(logging.WARNING, LOGGER):
        await notify_task_start(ext, store, INFO, budget=0.05)
        await notify_task_stop(ext, store, INFO, TaskOutcome.COMPLETED, budget=0.05)
    assert calls == ["slow start", "stop:a:completed", "stop:b:completed"]
    assert len(messages(caplog, logging.WARNING)) == 2


async def test_a_contributor_that_swallows_the_budget_cancellation_still_ends_the_notification(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    class Stubborn:
        async def on_task_start(self, *args: Any) -> None:
            calls.append("stubborn")
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                calls.append("swallowed")

    ext = lifecycle(Stubborn(), Recorder(calls, "b"))
    with caplog.at_level(logging.WARNING, LOGGER):
        await notify_task_start(ext, ExtensionData("t"), INFO, budget=0.05)
    assert calls == ["stubborn", "swallowed"]
    assert messages(caplog, logging.WARNING) == [
        "Extension acme_audit:install: on_task_start timed out for task 7f3c; the 0.05s notification budget was spent",
        "Extension acme_costs:install: on_task_start skipped for task 7f3c; the 0.05s notification budget was spent",
    ]
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_contributors_own_cancelled_error_is_contained_and_the_next_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    ext = lifecycle(Recorder(calls, "a", "self_cancel"), Recorder(calls, "b"))
    with caplog.at_level(logging.ERROR, LOGGER):
        await notify_task_start(ext, ExtensionData("t"), INFO)
    assert calls == ["a", "b"]
    assert messages(caplog, logging.ERROR) == ["Extension acme_audit:install: on_task_start raised CancelledError"]


async def test_a_self_cancelling_contributor_does_not_end_the_run_as_cancelled() -> None:
    calls: list[str] = []
    ext = lifecycle(Recorder(calls, "a", "self_cancel"), Recorder(calls, "b"))

    async def run() -> str:
        await notify_task_start(ext, ExtensionData("t"), INFO)
        await asyncio.sleep(0)
        return "completed"

    task = asyncio.create_task(run())
    assert await task == "completed"
    assert not task.cancelled()


async def test_a_host_task_cancellation_during_a_hook_propagates_and_later_contributors_are_not_called() -> None:
    calls: list[str] = []
    ext = lifecycle(Recorder(calls, "a", "block"), Recorder(calls, "b"))
    task = asyncio.create_task(notify_task_start(ext, ExtensionData("t"), INFO))
    await wait_until(lambda: calls == ["a"])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert calls == ["a"]


async def test_a_host_cancellation_turned_into_another_error_still_propagates_as_cancellation() -> None:
    calls: list[str] = []

    class Converts:
        async def on_task_start(self, *args: Any) -> None:
            calls.append("converts")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise RuntimeError("shutting down") from None

    task = asyncio.create_task(notify_task_start(lifecycle(Converts(), Recorder(calls, "b")), ExtensionData("t"), INFO))
    await wait_until(lambda: calls == ["converts"])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls == ["converts"]


async def test_a_host_cancellation_swallowed_by_a_contributor_is_raised_at_the_end() -> None:
    calls: list[str] = []

    class Swallows:
        async def on_task_start(self, *args: Any) -> None:
            calls.append("swallows")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                return

    task = asyncio.create_task(notify_task_start(lifecycle(Swallows(), Recorder(calls, "b")), ExtensionData("t"), INFO))
    await wait_until(lambda: calls == ["swallows"])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_stop_hooks_run_in_a_cleanup_path_after_the_run_was_cancelled() -> None:
    """A run cancelled earlier has cancelling() == 1; that is the baseline, not a new cancel."""
    calls: list[str] = []
    ext = lifecycle(Recorder(calls, "a"), Recorder(calls, "b"))

    class SelfCancelStop:
        async def on_task_stop(self, *args: Any) -> None:
            calls.append("self-cancel stop")
            raise asyncio.CancelledError()

    ext = lifecycle(SelfCancelStop(), Recorder(calls, "b"))
    await stop_in_the_cleanup_of_a_cancelled_run(ext)
    assert calls == ["self-cancel stop", "stop:b:aborted"]


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
async def test_keyboard_interrupt_and_system_exit_always_propagate(error: type[BaseException]) -> None:
    calls: list[str] = []

    class Fatal:
        async def on_task_start(self, *args: Any) -> None:
            calls.append("fatal")
            raise error()

    with pytest.raises(error):
        await notify_task_start(lifecycle(Fatal(), Recorder(calls, "b")), ExtensionData("t"), INFO)
    assert calls == ["fatal"]


async def test_a_zero_budget_skips_everyone(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    with caplog.at_level(logging.WARNING, LOGGER):
        await notify_task_start(lifecycle(Recorder(calls, "a")), ExtensionData("t"), INFO, budget=0)
    assert calls == []
    assert messages(caplog, logging.WARNING) == [
        "Extension acme_audit:install: on_task_start skipped for task 7f3c; the 0.0s notification budget was spent"
    ]


async def test_a_sync_hook_is_reported_as_a_failure_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    class Sync:
        def on_task_start(self, *args: Any) -> None:
            calls.append("sync")

    with caplog.at_level(logging.ERROR, LOGGER):
        await notify_task_start(lifecycle(Sync(), Recorder(calls, "b")), ExtensionData("t"), INFO)
    assert calls == ["sync", "b"]
    [line] = messages(caplog, logging.ERROR)
    assert line.startswith("Extension acme_audit:install: on_task_start raised TypeError: ")


async def test_trace_logs_every_contributor_call(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "TRACE_EXTENSIONS", True)
    calls: list[str] = []
    with caplog.at_level(logging.INFO, LOGGER):
        await notify_task_start(lifecycle(Recorder(calls, "a"), Recorder(calls, "b")), ExtensionData("t"), INFO)
    assert messages(caplog, logging.INFO) == [
        "Extension acme_audit:install: calling on_task_start for task 7f3c",
        "Extension acme_costs:install: calling on_task_start for task 7f3c",
    ]


async def test_concurrent_notifications_on_one_loop_keep_their_own_deadlines() -> None:
    calls: list[str] = []

    class Sleeps:
        def __init__(self, name: str, seconds: float) -> None:
            self.name, self.seconds = name, seconds

        async def on_task_start(self, *args: Any) -> None:
            await asyncio.sleep(self.seconds)
            calls.append(self.name)

    long_budget = notify_task_start(lifecycle(Sleeps("long", 0.15)), ExtensionData("t"), INFO, budget=1.0)
    short_budget = notify_task_start(lifecycle(Sleeps("short", 0.15)), ExtensionData("t"), INFO, budget=0.05)
    await asyncio.gather(long_budget, short_budget)
    assert calls == ["long"]


# --------------------------------------------------------------------------------------
# The fast path: a notification none of whose contributors can suspend
# --------------------------------------------------------------------------------------
async def _no_await(*args: Any) -> None:
    return None


async def _awaits(*args: Any) -> None:
    await asyncio.sleep(0)


async def _async_with(*args: Any) -> None:
    async with asyncio.Lock():
        pass


async def _async_for(*args: Any) -> None:
    async for _ in _agen():
        pass


async def _agen() -> Any:
    yield 1


def _returns_a_coroutine(*args: Any) -> Any:
    return _no_await()


class _Methods:
    async def on_task_start(self, *args: Any) -> None:
        return None

    async def on_task_stop(self, *args: Any) -> None:
        await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("fn", "cannot_suspend"),
    [
        (_no_await, True),
        (_Methods().on_task_start, True),
        (_awaits, False),
        (_async_with, False),
        (_async_for, False),
        (_Methods().on_task_stop, False),
        (_agen, False),  # an async generator function, not a coroutine function
        (_returns_a_coroutine, False),  # sync: what it returns is unknown
        (lambda *args: _no_await(), False),
        (__import__("functools").partial(_no_await, 1), False),
        (print, False),
    ],
)
def test_only_coroutine_functions_without_a_suspension_point_are_classified_as_unable_to_suspend(
    fn: Any, cannot_suspend: bool
) -> None:
    assert notify_plans._cannot_suspend(fn) is cannot_suspend


def test_one_contributor_that_may_suspend_puts_the_whole_notification_on_the_full_path() -> None:
    calls: list[str] = []
    immediate = contributions(_Methods(), _Methods())
    mixed = contributions(_Methods(), Recorder(calls, "b"))
    assert notify_plans._build_plan(immediate, "on_task_start").may_suspend is False
    assert notify_plans._build_plan(mixed, "on_task_start").may_suspend is True


class _ImmediateStop:
    def __init__(self, calls: list[str], name: str, behaviour: str = "return") -> None:
        self.calls, self.name, self.behaviour = calls, name, behaviour

    async def on_task_stop(self, *args: Any) -> None:
        self.calls.append(self.name)
        if self.behaviour == "self_cancel":
            raise asyncio.CancelledError()
        if self.behaviour == "raise":
            raise ValueError(f"broken {self.name}")


async def test_fast_path_stop_hooks_in_a_cancelled_runs_cleanup_contain_their_own_cancelled_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    ext = lifecycle(
        _ImmediateStop(calls, "a", "self_cancel"), _ImmediateStop(calls, "b", "raise"), _ImmediateStop(calls, "c")
    )
    assert not notify_plans._build_plan(ext.task_lifecycle, "on_task_stop").may_suspend
    with caplog.at_level(logging.ERROR, LOGGER):
        await stop_in_the_cleanup_of_a_cancelled_run(ext)
    assert calls == ["a", "b", "c"]
    assert messages(caplog, logging.ERROR) == [
        "Extension acme_audit:install: on_task_stop raised CancelledError",
        "Extension acme_costs:install: on_task_stop raised ValueError: broken b",
    ]


async def test_fast_path_delivers_a_pending_host_cancellation_at_the_callers_next_await() -> None:
    calls: list[str] = []
    ext = lifecycle(_ImmediateStop(calls, "a"), _ImmediateStop(calls, "b"))
    reached_next_await = False

    async def run() -> None:
        nonlocal reached_next_await
        current = asyncio.current_task()
        assert current is not None
        current.cancel()  # requested while the task runs: delivered at its next suspension
        await notify_task_stop(ext, ExtensionData("t"), INFO, TaskOutcome.COMPLETED)
        reached_next_await = True
        await asyncio.sleep(0)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(run())
    assert calls == ["a", "b"]
    assert reached_next_await


@pytest.mark.parametrize("arity", [3, 4, 5, 2])
async def test_the_fast_path_contains_failures_and_attributes_exits_whatever_the_hooks_arity(
    arity: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Hooks that cannot suspend, called with 2-5 arguments (the loop is spelled out for the
    lifecycle arities): every one is called with exactly the arguments, in order; a failure
    is contained and attributed; an exit propagates, attributed to its contributor."""
    from deerflow_ext.extensions.boundary.exits import exit_origin

    calls: list[tuple[str, tuple[Any, ...]]] = []

    class Hook:
        def __init__(self, name: str, error: type[BaseException] | None = None) -> None:
            self.name, self.error = name, error

        async def on_hook(self, *args: Any) -> None:
            calls.append((self.name, args))
            if self.error is not None:
                raise self.error(self.name)

    args = tuple(f"arg{n}" for n in range(arity))
    ok = contributions(Hook("a"), Hook("b", ValueError), Hook("c"))
    assert not notify_plans._build_plan(ok, "on_hook").may_suspend  # the fast path
    with caplog.at_level(logging.ERROR, LOGGER):
        await notify_plans._notify_each(ok, "on_hook", args, task_id="t")
    assert calls == [("a", args), ("b", args), ("c", args)]
    assert messages(caplog, logging.ERROR) == ["Extension acme_costs:install: on_hook raised ValueError: b"]
    calls.clear()
    fatal = contributions(Hook("a"), Hook("x", SystemExit), Hook("c"))
    with pytest.raises(SystemExit) as raised:
        await notify_plans._notify_each(fatal, "on_hook", args, task_id="t")
    assert [name for name, _ in calls] == ["a", "x"]
    origin = exit_origin(raised.value)
    assert origin is not None and origin.extension == "acme_costs:install" and origin.hook == "on_hook"
