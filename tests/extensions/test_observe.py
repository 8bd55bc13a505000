"""System-model-call observation and compaction events: every terminal path, exactly once."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.extensions.notifications import observe
from deerflow_ext.extensions.notifications.notification_loop import notification_loop
from deerflow_ext.extensions.notifications.observe import (
    observe_system_call,
    submit_compaction,
    submit_system_observation,
    wants_compaction,
)
from deerflow_extension_api import (
    CompactionEvent,
    ExtensionData,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
)

LOGGER = "deerflow_ext.extensions"
REQUEST = SystemModelRequest(messages=["m1", "m2"], model_name="gpt-4o-mini")


@pytest.fixture(autouse=True)
def _fresh_notification_loop() -> Any:
    notification_loop.reset()
    yield
    notification_loop.reset()


class Observer:
    def __init__(self) -> None:
        self.seen: list[
            tuple[ExtensionData, ExtensionData, SystemOperationKind, SystemModelRequest, SystemModelResult]
        ] = []
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def on_system_model_call(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        kind: SystemOperationKind,
        request: SystemModelRequest,
        result: SystemModelResult,
    ) -> None:
        self.seen.append((app_store, task_store, kind, request, result))
        self.loops.append(asyncio.get_running_loop())


def observed(*observers: object) -> LoadedExtensions:
    return LoadedExtensions(
        system_model_observers=tuple(
            Contribution(f"obs{i}:install", f"obs{i}", i, f"{i}:obs{i}:install#1", o) for i, o in enumerate(observers)
        )
    )


async def test_success_is_reported_once_inline_and_the_result_is_returned_unchanged() -> None:
    observer = Observer()
    ext = observed(observer)
    store = ExtensionData("7f3c")
    response = object()

    async def call() -> object:
        await asyncio.sleep(0.01)
        return response

    assert await observe_system_call(ext, store, SystemOperationKind.TITLE, REQUEST, call) is response
    [(app_store, task_store, kind, request, result)] = observer.seen
    assert (app_store, task_store, kind, request) == (
        ext.app_store,
        store,
        SystemOperationKind.TITLE,
        REQUEST,
    )
    assert result.response is response and result.error is None
    assert result.duration_ms is not None and result.duration_ms >= 5.0


async def test_failure_is_reported_once_and_the_same_exception_object_propagates() -> None:
    observer = Observer()
    error = ConnectionError("provider down")

    async def call() -> object:
        raise error

    with pytest.raises(ConnectionError) as caught:
        await observe_system_call(observed(observer), ExtensionData("t"), SystemOperationKind.GOAL, REQUEST, call)
    assert caught.value is error
    [(*_, result)] = observer.seen
    assert result.error is error and result.response is None and result.duration_ms is not None


async def test_cancellation_is_submitted_not_awaited_and_reported_once() -> None:
    notification_loop.register(asyncio.get_running_loop())
    release = asyncio.Event()

    class Gated(Observer):
        async def on_system_model_call(self, *args: Any) -> None:
            await super().on_system_model_call(*args)
            await release.wait()

    observer = Gated()
    started = asyncio.Event()

    async def call() -> object:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    caller = asyncio.create_task(
        observe_system_call(observed(observer), ExtensionData("t"), SystemOperationKind.SUMMARIZATION, REQUEST, call)
    )
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    # The caller is already done while the observer is still blocked: it was not awaited.
    assert caller.cancelled()
    assert not release.is_set()
    release.set()
    await notification_loop.drain(1.0)
    [(*_, kind, _request, result)] = observer.seen
    assert kind is SystemOperationKind.SUMMARIZATION
    assert isinstance(result.error, asyncio.CancelledError)


async def test_a_repeated_cancel_cannot_interrupt_the_cancellation_observation() -> None:
    notification_loop.register(asyncio.get_running_loop())
    observer = Observer()

    class Slow(Observer):
        async def on_system_model_call(self, *args: Any) -> None:
            await asyncio.sleep(0.02)
            await super().on_system_model_call(*args)

    slow = Slow()
    started = asyncio.Event()

    async def call() -> object:
        started.set()
        await asyncio.Event().wait()

    caller = asyncio.create_task(
        observe_system_call(observed(slow, observer), None, SystemOperationKind.GOAL, REQUEST, call)
    )
    await started.wait()
    caller.cancel()
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await notification_loop.drain(1.0)
    assert len(slow.seen) == 1 and len(observer.seen) == 1


async def test_without_a_notification_loop_the_cancellation_observation_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    observer = Observer()
    started = asyncio.Event()

    async def call() -> object:
        started.set()
        await asyncio.Event().wait()

    caller = asyncio.create_task(observe_system_call(observed(observer), None, SystemOperationKind.GOAL, REQUEST, call))
    await started.wait()
    with caplog.at_level(logging.DEBUG, LOGGER):
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
    await asyncio.sleep(0.01)  # a window for a (wrongly) scheduled observation: nothing to wait on
    assert observer.seen == []
    assert "no notification loop registered; dropping goal system-model observation" in caplog.text


async def test_observer_failures_are_logged_never_propagated_or_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        async def on_system_model_call(self, *args: Any) -> None:
            raise ValueError("observer bug")

    after = Observer()
    ext = observed(Broken(), after)

    async def call() -> str:
        return "title"

    with caplog.at_level(logging.ERROR, LOGGER):
        result = await observe_system_call(ext, None, SystemOperationKind.TITLE, REQUEST, call)
    assert result == "title"
    assert len(after.seen) == 1
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        "Extension obs0:install: on_system_model_call raised ValueError: observer bug"
    ]
    assert len(ext.diagnostics) == 0


async def test_an_observer_failure_does_not_replace_the_calls_own_exception() -> None:
    class Broken:
        async def on_system_model_call(self, *args: Any) -> None:
            raise ValueError("observer bug")

    error = TimeoutError("provider timeout")

    async def call() -> object:
        raise error

    with pytest.raises(TimeoutError) as caught:
        await observe_system_call(observed(Broken()), None, SystemOperationKind.MEMORY, REQUEST, call)
    assert caught.value is error


async def test_no_task_store_gives_each_notification_a_fresh_detached_store() -> None:
    observer = Observer()
    ext = observed(observer)

    async def call() -> str:
        return "ok"

    await observe_system_call(ext, None, SystemOperationKind.TITLE, REQUEST, call)
    await observe_system_call(ext, None, SystemOperationKind.TITLE, REQUEST, call)
    first, second = observer.seen[0][1], observer.seen[1][1]
    assert first.scope_id == second.scope_id == "detached"
    assert first is not second


async def test_no_observers_means_a_straight_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("timed or observed although nobody listens")

    monkeypatch.setattr(observe.time, "perf_counter", forbidden)
    monkeypatch.setattr(notification_loop, "run", forbidden)

    async def call() -> str:
        return "straight"

    assert await observe_system_call(LoadedExtensions(), None, SystemOperationKind.GOAL, REQUEST, call) == "straight"
    assert (
        submit_system_observation(LoadedExtensions(), None, SystemOperationKind.GOAL, REQUEST, SystemModelResult())
        is False
    )


async def test_inline_observation_from_another_loop_runs_on_the_registered_loop() -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)
    observer = Observer()
    ext = observed(observer)
    outcome: dict[str, Any] = {}

    async def call() -> str:
        outcome["call_loop"] = asyncio.get_running_loop()
        return "goal met"

    def subagent() -> None:
        outcome["result"] = asyncio.run(observe_system_call(ext, None, SystemOperationKind.GOAL, REQUEST, call))

    thread = threading.Thread(target=subagent)
    thread.start()
    await asyncio.to_thread(thread.join, 5)
    assert outcome["result"] == "goal met"
    assert outcome["call_loop"] is not gateway_loop
    assert observer.loops == [gateway_loop]


async def test_the_memory_bridge_submits_from_a_worker_thread() -> None:
    gateway_loop = asyncio.get_running_loop()
    notification_loop.register(gateway_loop)
    observer = Observer()
    result = SystemModelResult(response="facts", duration_ms=12.0)
    accepted = await asyncio.to_thread(
        submit_system_observation, observed(observer), None, SystemOperationKind.MEMORY, REQUEST, result
    )
    assert accepted is True
    await notification_loop.drain(1.0)
    [(_, store, kind, _, seen_result)] = observer.seen
    assert store.scope_id == "detached" and kind is SystemOperationKind.MEMORY and seen_result is result
    assert observer.loops == [gateway_loop]


def test_a_prompt_string_is_one_message() -> None:
    assert SystemModelRequest(messages="abc").messages == ("abc",)
    live = ["a", "b"]
    request = SystemModelRequest(messages=live)
    live.append("c")
    assert request.messages == ("a", "b")


# -- compaction ------------------------------------------------------------------------------
EVENT = CompactionEvent(
    transform_kind="summarization",
    transform_version="1",
    source_content_hashes=("h1", "h2"),
    output_content_hash="out",
    compacted_message_count=2,
    kept_message_count=1,
    task_id="7f3c",
)


def compacting(*observers: object) -> LoadedExtensions:
    return LoadedExtensions(
        compaction_observers=tuple(
            Contribution(f"cmp{i}:install", f"cmp{i}", i, f"{i}:cmp{i}:install#1", o) for i, o in enumerate(observers)
        )
    )


async def test_compaction_is_fire_and_forget_in_order_with_a_detached_store(
    caplog: pytest.LogCaptureFixture,
) -> None:
    notification_loop.register(asyncio.get_running_loop())
    seen: list[tuple[str, ExtensionData, CompactionEvent]] = []

    class Logs:
        def __init__(self, name: str) -> None:
            self.name = name

        async def on_context_compacted(
            self, app_store: ExtensionData, task_store: ExtensionData, event: CompactionEvent
        ) -> None:
            seen.append((self.name, task_store, event))

    class Broken:
        async def on_context_compacted(self, *args: Any) -> None:
            raise RuntimeError("compaction observer bug")

    ext = compacting(Logs("first"), Broken(), Logs("third"))
    assert wants_compaction(ext) is True
    with caplog.at_level(logging.ERROR, LOGGER):
        assert submit_compaction(ext, EVENT) is True
        assert seen == []
        await notification_loop.drain(1.0)
    assert [name for name, _, _ in seen] == ["first", "third"]
    assert seen[0][1].scope_id == "detached" and seen[0][1] is seen[1][1]
    assert seen[0][2] is EVENT
    assert "Extension cmp1:install: on_context_compacted raised RuntimeError: compaction observer bug" in caplog.text

    assert submit_compaction(ext, EVENT) is True
    await notification_loop.drain(1.0)
    assert seen[2][1] is not seen[0][1], "each notification gets a fresh detached store"


async def test_no_compaction_observers_means_no_hashing_and_no_submission() -> None:
    notification_loop.register(asyncio.get_running_loop())
    assert wants_compaction(LoadedExtensions()) is False
    assert submit_compaction(LoadedExtensions(), EVENT) is False


async def test_compaction_after_intake_closed_is_dropped() -> None:
    notification_loop.register(asyncio.get_running_loop())
    notification_loop.close_intake()
    seen: list[CompactionEvent] = []

    class Logs:
        async def on_context_compacted(self, app_store: Any, task_store: Any, event: CompactionEvent) -> None:
            seen.append(event)

    assert submit_compaction(compacting(Logs()), EVENT) is False
    await asyncio.sleep(0.01)  # a window for a (wrongly) scheduled observation: nothing to wait on
    assert seen == []
