"""``execute_lead_run`` driven directly: the spec's order around one lead run, and what each
way of ending leaves in the database, the stream and the extension's hooks.

The Gateway suite checks the same order through HTTP; here the worker is the only code
between the test and a real ``HostStore``, so a failure points at the worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from deerflow_ext.extensions.contract.snapshot import EXTENSION_SNAPSHOT_CONTEXT_KEY
from deerflow_ext.runtime import LeadRunSpec, LocalThreadCoordinator, RunCompletion, execute_lead_run
from deerflow_ext.testing import wait_until
from gateway.gw_fixtures import FakeAgentHost, LifecycleRecorder, extensions_with, kinds, record


def _spec(text: str = "hi") -> LeadRunSpec:
    return LeadRunSpec(messages=({"role": "user", "content": text},))


async def _recorded_completion(completion: RunCompletion) -> None:
    record("completion", completion.run_id)


class StopProbe(LifecycleRecorder):
    """Notes, from inside ``on_task_stop``, what must already be true and what must not yet be."""

    def __init__(self, bench: Any, coordinator: LocalThreadCoordinator) -> None:
        super().__init__()
        self.bench, self.coordinator = bench, coordinator
        self.at_stop: dict[str, Any] = {}

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        run = await self.bench.store.get_run(info.thread_id, info.run_id)
        self.at_stop = {
            "run": (run.status, run.outcome),
            "holder": self.coordinator.holder(info.thread_id),
            "events": await self.bench.events(info.run_id),
        }
        await super().on_task_stop(app_store, task_store, info, outcome)


async def test_a_completed_run_follows_the_spec_order_and_persists_before_on_task_stop(bench: Any) -> None:
    coordinator = LocalThreadCoordinator()
    probe = StopProbe(bench, coordinator)
    handle = await bench.new_run(extensions_with(lifecycle=probe))
    deps = bench.deps(FakeAgentHost(), coordinator, completion_hooks=(_recorded_completion,))

    await execute_lead_run(handle, _spec(), deps)

    assert kinds(handle.run_id) == ["start", "agent-begin", "agent-end", "completion", "stop-begin", "stop-end"]
    # on_task_stop runs after persistence, with the thread still held and the stream still open.
    assert probe.at_stop["run"] == ("success", "completed")
    assert probe.at_stop["holder"] == handle.run_id
    assert "end" not in probe.at_stop["events"]
    # Then the thread is released and the stream ends.
    assert coordinator.holder(handle.thread_id) is None
    assert (await bench.events(handle.run_id))[-1] == "end"
    assert handle.finished.is_set()
    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.answer, run.tokens.total_tokens, run.error) == ("echo: hi", 7, None)
    assert run.started_at is not None and run.finished_at is not None
    thread = await bench.store.get_thread(handle.thread_id)
    assert (thread.status, thread.title) == ("idle", "Title hi")
    assert probe.stores[handle.run_id][0] is probe.stores[handle.run_id][1], "one task store for both hooks"


async def test_the_agent_failing_ends_the_run_error_with_one_line_and_both_hooks(bench: Any) -> None:
    recorder = LifecycleRecorder()
    handle = await bench.new_run(extensions_with(lifecycle=recorder))

    await execute_lead_run(handle, _spec(), bench.deps(FakeAgentHost(fail=True)))

    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.status, run.outcome, run.error) == ("error", "failed", "ValueError: the model is on fire")
    assert recorder.outcomes == {handle.run_id: "failed"}
    assert (await bench.events(handle.run_id))[-2:] == ["error", "end"]
    assert (await bench.store.get_thread(handle.thread_id)).status == "error"


async def test_a_run_stopped_before_its_task_first_ran_gets_no_hooks_and_is_recorded_interrupted(bench: Any) -> None:
    recorder, agent = LifecycleRecorder(), FakeAgentHost()
    handle = await bench.new_run(extensions_with(lifecycle=recorder))
    handle.task = asyncio.create_task(execute_lead_run(handle, _spec(), bench.deps(agent)))
    assert handle.interrupt() is True  # marked, not cancelled: the worker honours the mark

    await handle.task

    assert kinds(handle.run_id) == [] and agent.calls == []
    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.status, run.outcome, run.error) == ("interrupted", "aborted", "interrupted before it started")
    assert run.started_at is None
    assert await bench.events(handle.run_id) == ["end"]


async def test_a_run_interrupted_while_the_agent_works_is_aborted_and_still_finalized(bench: Any) -> None:
    recorder = LifecycleRecorder()
    handle = await bench.new_run(extensions_with(lifecycle=recorder))
    handle.task = asyncio.create_task(execute_lead_run(handle, _spec("slow"), bench.deps(FakeAgentHost(delay=30))))
    await wait_until(lambda: "agent-begin" in kinds(handle.run_id))

    assert handle.interrupt() is True
    await handle.task

    assert kinds(handle.run_id) == ["start", "agent-begin", "agent-end", "stop-begin", "stop-end"]
    assert recorder.outcomes == {handle.run_id: "aborted"}
    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.status, run.outcome, run.error) == ("interrupted", "aborted", "interrupted")
    assert (await bench.store.get_thread(handle.thread_id)).status == "interrupted"
    assert handle.interrupt() is False, "a finished run cannot be stopped again"


async def test_a_run_ended_elsewhere_while_queued_is_not_started(bench: Any) -> None:
    agent = FakeAgentHost()
    handle = await bench.new_run(extensions_with(lifecycle=LifecycleRecorder()))
    # Another process decided this run's owner was dead and ended it (runtime/presence.py).
    await bench.store.finish_run(handle.run_id, status="interrupted", outcome="aborted", error="owner gone")

    await execute_lead_run(handle, _spec(), bench.deps(agent))

    assert kinds(handle.run_id) == [] and agent.calls == []
    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.status, run.error, run.started_at) == ("interrupted", "owner gone", None)
    assert await bench.events(handle.run_id) == ["end"]


async def test_a_failing_completion_hook_does_not_skip_on_task_stop(bench: Any) -> None:
    recorder = LifecycleRecorder()
    handle = await bench.new_run(extensions_with(lifecycle=recorder))

    async def broken(completion: RunCompletion) -> None:
        raise RuntimeError("hook bug")

    await execute_lead_run(handle, _spec(), bench.deps(FakeAgentHost(), completion_hooks=(broken,)))

    assert recorder.outcomes == {handle.run_id: "completed"}
    assert (await bench.store.get_run(handle.thread_id, handle.run_id)).status == "success"


async def test_the_run_publishes_its_own_snapshot_over_a_caller_supplied_one(bench: Any) -> None:
    agent = FakeAgentHost()
    handle = await bench.new_run(extensions_with())
    forged = {EXTENSION_SNAPSHOT_CONTEXT_KEY: extensions_with(lifecycle=LifecycleRecorder()), "user": "u1"}

    await execute_lead_run(handle, dataclasses.replace(_spec(), context=forged), bench.deps(agent))

    [(request, extensions, task_store)] = agent.calls
    assert request.context[EXTENSION_SNAPSHOT_CONTEXT_KEY] is handle.extensions is extensions
    assert request.context["user"] == "u1"
    assert task_store is None, "no task-scoped contributor: no task store"
    assert request.run_id == handle.run_id and request.thread_id == handle.thread_id
    assert (await bench.store.get_run(handle.thread_id, handle.run_id)).status == "success"


class DatabaseAway:
    """The bench's real store, whose ``finish_run`` fails while ``away`` (a database restart),
    as the driver reports it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.away = True
        self.refused = 0

    async def finish_run(self, *args: Any, **kwargs: Any) -> Any:
        if self.away:
            self.refused += 1
            raise ConnectionRefusedError("the database is restarting")
        return await self._store.finish_run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_run_ending_while_the_database_is_away_is_saved_once_it_answers(bench: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("deerflow_ext.runtime.worker.RETRY_FIRST_DELAY", 0.01)
    handle = await bench.new_run(extensions_with())
    away = DatabaseAway(bench.store)
    deps = dataclasses.replace(bench.deps(FakeAgentHost()), store=away)

    await execute_lead_run(handle, _spec(), deps)  # ends, hooks and stream included, without the database
    assert "end" in await bench.events(handle.run_id)
    await wait_until(lambda: away.refused >= 4)
    assert (await bench.store.get_run(handle.thread_id, handle.run_id)).status == "running"

    away.away = False
    for _ in range(1000):  # the next retry saves it: first delay 10 ms, doubling
        if (await bench.store.get_run(handle.thread_id, handle.run_id)).status == "success":
            break
        await asyncio.sleep(0.01)
    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.status, run.outcome) == ("success", "completed")


@dataclasses.dataclass(frozen=True)
class StaleTaskInfo:
    """``TaskInfo`` as an older contract build has it: no ``user_id``."""

    task_id: str
    run_id: str | None
    thread_id: str
    kind: str
    agent_name: str | None = None


async def test_a_run_failing_around_its_agent_ends_error_and_frees_its_thread(bench: Any, monkeypatch: Any) -> None:
    # An installed contract older than the host (TaskInfo without user_id) fails the run
    # after it was marked started: it must still end, not stay "running" with its thread busy.
    monkeypatch.setattr("deerflow_ext.runtime.worker.TaskInfo", StaleTaskInfo)
    coordinator, agent = LocalThreadCoordinator(), FakeAgentHost()
    handle = await bench.new_run(extensions_with(lifecycle=LifecycleRecorder()))

    await execute_lead_run(handle, _spec(), bench.deps(agent, coordinator))

    assert agent.calls == [] and handle.finished.is_set()
    run = await bench.store.get_run(handle.thread_id, handle.run_id)
    assert (run.status, run.outcome) == ("error", "failed")
    assert run.error.startswith("failed: TypeError") and "user_id" in run.error
    assert (await bench.store.get_thread(handle.thread_id)).status == "error"
    assert coordinator.holder(handle.thread_id) is None
    assert (await bench.events(handle.run_id))[-2:] == ["error", "end"]
