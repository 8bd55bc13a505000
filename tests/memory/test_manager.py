"""MemoryManager: the model drives DeerMem; extraction calls become MEMORY observations."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from deerflow_ext.agents.prompts import MEMORY_MARKER
from deerflow_ext.config.schema import MemoryConfig
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.extensions.notifications import observe
from deerflow_ext.extensions.notifications.notification_loop import notification_loop
from deerflow_ext.memory import MemoryManager
from deerflow_extension_api import SystemModelRequest, SystemModelResult, SystemOperationKind


class FactModel(BaseChatModel):
    reply: str = '["The user likes tea"]'
    fail_with: Exception | None = None
    prompts: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "facts"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(str(messages[-1].content))
        if self.fail_with is not None:
            raise self.fail_with
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])


class Observer:
    async def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> None:
        return None


def with_observer() -> LoadedExtensions:
    return LoadedExtensions(
        system_model_observers=(Contribution("obs:install", "obs", 0, "0:obs:install#1", Observer()),)
    )


class Submissions:
    """Stands in for ``submit_system_observation``: records, returns at once (never awaits)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.threads: list[threading.Thread] = []

    def __call__(self, ext: Any, task_store: Any, kind: Any, request: Any, result: Any) -> bool:
        self.calls.append((ext, task_store, kind, request, result))
        self.threads.append(threading.current_thread())
        return True


CONVERSATION = [HumanMessage("I like tea"), AIMessage("Noted.")]


def manager(model: BaseChatModel, submit: Submissions, **config: Any) -> MemoryManager:
    return MemoryManager(MemoryConfig(debounce_seconds=60, **config), model, submit=submit)


def test_extraction_uses_the_memory_prompt_and_stores_facts() -> None:
    model = FactModel(prompts=[])
    memory = manager(model, Submissions())
    memory.schedule("t", CONVERSATION, extensions=LoadedExtensions())
    memory.flush()
    assert memory.facts("t") == ["The user likes tea"]
    (prompt,) = model.prompts
    assert prompt.startswith(MEMORY_MARKER) and "I like tea" in prompt


def test_the_bridge_submits_one_memory_observation_from_the_worker_thread() -> None:
    submit = Submissions()
    memory = MemoryManager(
        MemoryConfig(debounce_seconds=60), FactModel(prompts=[]), model_name="tea-model", submit=submit
    )
    ext = with_observer()
    memory.schedule("t", CONVERSATION, extensions=ext)
    memory.flush()

    ((got_ext, task_store, kind, request, result),) = submit.calls
    assert got_ext is ext
    assert task_store is None  # detached: the extraction outlives the run
    assert kind is SystemOperationKind.MEMORY
    assert isinstance(request, SystemModelRequest) and isinstance(result, SystemModelResult)
    assert request.messages == tuple(CONVERSATION) and request.model_name == "tea-model"
    assert result.response == '["The user likes tea"]' and result.error is None
    assert result.duration_ms is not None and result.duration_ms >= 0
    assert submit.threads[0] is not threading.current_thread()


def test_a_failed_extraction_is_observed_with_its_error() -> None:
    failure = RuntimeError("quota")
    submit = Submissions()
    memory = manager(FactModel(prompts=[], fail_with=failure), submit)
    memory.schedule("t", CONVERSATION, extensions=with_observer())
    memory.flush()
    ((_, _, _, _, result),) = submit.calls
    assert result.error is failure and result.response is None
    assert memory.facts("t") == []


def test_the_newest_schedule_brings_its_own_snapshot() -> None:
    submit = Submissions()
    memory = manager(FactModel(prompts=[]), submit)
    old, new = with_observer(), with_observer()
    memory.schedule("t", CONVERSATION, extensions=old)
    memory.schedule("t", CONVERSATION, extensions=new)
    memory.flush()
    assert [call[0] for call in submit.calls] == [new]


def test_no_observer_means_no_observation() -> None:
    submit = Submissions()
    memory = manager(FactModel(prompts=[]), submit)
    memory.schedule("t", CONVERSATION, extensions=LoadedExtensions())
    memory.flush()
    assert submit.calls == [] and memory.facts("t") == ["The user likes tea"]


def test_a_failing_submission_does_not_lose_the_facts() -> None:
    def broken(*args: Any) -> bool:
        raise RuntimeError("loop gone")

    memory = MemoryManager(MemoryConfig(debounce_seconds=60), FactModel(prompts=[]), submit=broken)
    memory.schedule("t", CONVERSATION, extensions=with_observer())
    memory.flush()
    assert memory.facts("t") == ["The user likes tea"]


def test_disabled_memory_is_a_no_op() -> None:
    model, submit = FactModel(prompts=[]), Submissions()
    memory = manager(model, submit, enabled=False)
    memory.schedule("t", CONVERSATION, extensions=with_observer())
    memory.flush()
    memory.shutdown()
    assert not memory.enabled
    assert memory.facts("t") == [] and model.prompts == [] and submit.calls == []


def test_shutdown_flushes_pending_extractions() -> None:
    memory = manager(FactModel(prompts=[]), Submissions())
    memory.schedule("t", CONVERSATION, extensions=LoadedExtensions())
    memory.shutdown()
    assert memory.facts("t") == ["The user likes tea"]


def test_model_name_is_probed_from_the_model() -> None:
    class Named(FactModel):
        model_name: str = "gpt-probe"

    submit = Submissions()
    memory = MemoryManager(MemoryConfig(debounce_seconds=60), Named(prompts=[]), submit=submit)
    memory.schedule("t", CONVERSATION, extensions=with_observer())
    memory.flush()
    assert submit.calls[0][3].model_name == "gpt-probe"


def test_the_default_submission_goes_through_observe(monkeypatch: pytest.MonkeyPatch) -> None:
    submit = Submissions()
    monkeypatch.setattr(observe, "submit_system_observation", submit)
    memory = MemoryManager(MemoryConfig(debounce_seconds=60), FactModel(prompts=[]))
    memory.schedule("t", CONVERSATION, extensions=with_observer())
    memory.flush()
    assert [call[2] for call in submit.calls] == [SystemOperationKind.MEMORY]


class RecordingObserver:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any, Any, Any]] = []
        self.done = threading.Event()
        self.gate = threading.Event()
        self.gate.set()

    async def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> None:
        await asyncio.to_thread(self.gate.wait, 10)
        self.seen.append((task_store.scope_id, kind, request.messages, result.response))
        self.done.set()


def test_end_to_end_the_observer_runs_on_the_notification_loop_with_a_detached_store() -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    notification_loop.register(loop)
    try:
        observer = RecordingObserver()
        observer.gate.clear()  # the observer cannot finish until the extraction side has
        ext = LoadedExtensions(
            system_model_observers=(Contribution("obs:install", "obs", 0, "0:obs:install#1", observer),)
        )
        memory = MemoryManager(MemoryConfig(debounce_seconds=60), FactModel(prompts=[]))
        memory.schedule("t", CONVERSATION, extensions=ext)
        memory.flush(timeout=5)  # returns once extraction is done; the observation is only submitted
        # Submitted, not awaited: the extraction finished while the observer is still held.
        assert memory.facts("t") == ["The user likes tea"] and observer.seen == []
        observer.gate.set()
        assert observer.done.wait(5)
        ((scope_id, kind, messages, response),) = observer.seen
        assert scope_id == "detached" and kind is SystemOperationKind.MEMORY
        assert messages == tuple(CONVERSATION) and response == '["The user likes tea"]'
    finally:
        notification_loop.reset()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


def test_without_a_notification_loop_the_observation_is_dropped_quietly() -> None:
    notification_loop.reset()
    observer = RecordingObserver()
    ext = LoadedExtensions(system_model_observers=(Contribution("obs:install", "obs", 0, "0:obs:install#1", observer),))
    memory = MemoryManager(MemoryConfig(debounce_seconds=60), FactModel(prompts=[]))
    memory.schedule("t", CONVERSATION, extensions=ext)
    memory.flush()
    assert memory.facts("t") == ["The user likes tea"] and observer.seen == []
