"""Subagents: own thread and loop, nested hooks, stop after the lease, snapshot binding."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from agent_helpers import Recorder, make_config, make_host, recording_extensions

from deerflow_ext.agents.embedded_model import EmbeddedChatModel
from deerflow_ext.agents.host import LeadRunRequest
from deerflow_ext.agents.lead import subagent_builder
from deerflow_ext.extensions.contract.snapshot import set_loaded_extensions
from deerflow_ext.subagents.executor import SubagentExecutor
from deerflow_ext.subagents.sandbox import SandboxPool
from deerflow_extension_api import TaskOutcome


def _delegate(run_id: str = "run-1") -> LeadRunRequest:
    return LeadRunRequest(thread_id="t-1", run_id=run_id, messages=({"role": "user", "content": "delegate: sum it"},))


async def test_delegation_runs_subagent_on_its_own_thread_and_loop(recorder: Recorder, notify_loop: Any) -> None:
    ext = recording_extensions(recorder)
    host = make_host(make_config(memory={"enabled": False}))
    result = await host.run_lead(_delegate(), extensions=ext, task_store=ext.new_task_store("run-1"))
    assert result.answer == "Done. task returned: Here is my answer to: sum it"
    lead_steps = [s for s in recorder.steps if s["agent"] == "lead"]
    sub_steps = [s for s in recorder.steps if s["agent"] == "general-purpose"]
    assert lead_steps and sub_steps
    assert sub_steps[0]["thread"] != lead_steps[0]["thread"] and sub_steps[0]["loop"] != lead_steps[0]["loop"]
    starts = [e for e in recorder.events if e[0] in ("start", "stop")]
    assert [(e[0], e[1]) for e in starts] == [("start", "subagent"), ("stop", "subagent")]
    (info,) = recorder.infos
    assert info.kind == "subagent" and info.parent_task_id == "run-1" and info.run_id == "run-1"
    assert info.task_id.startswith("subagent-") and starts[1][3] == TaskOutcome.COMPLETED.value
    # on_task_stop ran after the subagent's lease was returned (the lead's own lease is still held).
    (owners,) = recorder.stop_owners
    assert not any(owner.startswith("subagent:") for owner in owners)


async def test_subagent_task_store_is_scoped_to_the_delegating_tool_call(recorder: Recorder) -> None:
    ext = recording_extensions(recorder, kinds=("lifecycle",))
    config = make_config()
    executor = SubagentExecutor(
        config,
        build_subagent=subagent_builder(config),
        extensions=ext,
        parent_run_id="run-9",
        thread_id="t",
        tool_call_id="call_abc",
    )
    seen: list[str] = []

    class Spy:
        async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
            seen.append(task_store.scope_id)

    from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions

    executor.extensions = LoadedExtensions(task_lifecycle=(Contribution("spy:install", "spy", 0, "0:spy#0", Spy()),))
    result = await executor.aexecute("hello")
    assert result.outcome is TaskOutcome.COMPLETED and seen == ["call_abc"]


async def test_no_parent_run_id_skips_both_hooks(recorder: Recorder, caplog: pytest.LogCaptureFixture) -> None:
    ext = recording_extensions(recorder, kinds=("lifecycle",))
    caplog.set_level(logging.DEBUG, logger="deerflow_ext.subagents.executor")
    config = make_config()
    executor = SubagentExecutor(
        config, build_subagent=subagent_builder(config), extensions=ext, parent_run_id=None, thread_id=None
    )
    result = executor.execute("hello")
    assert result.outcome is TaskOutcome.COMPLETED and result.answer
    assert recorder.events == []
    assert any("no parent run_id" in r.getMessage() for r in caplog.records)


async def test_failed_subagent_still_stops_after_lease_release(recorder: Recorder) -> None:
    ext = recording_extensions(recorder, kinds=("lifecycle",))
    pool = SandboxPool()

    def broken_factory(name: str | None) -> Any:
        raise RuntimeError("no model for you")

    config = make_config()
    executor = SubagentExecutor(
        config,
        build_subagent=subagent_builder(config, model_factory=broken_factory),
        extensions=ext,
        parent_run_id="run-1",
        thread_id="t",
        pool=pool,
    )
    result = await executor.aexecute("x")
    assert result.outcome is TaskOutcome.FAILED and "no model for you" in (result.error or "")
    assert [e[0] for e in recorder.events] == ["start", "stop"] and recorder.events[-1][3] == "failed"
    assert pool.active == 0


async def test_subagent_is_built_from_the_runs_snapshot_after_global_replacement(
    recorder: Recorder, restore_process_extensions: None
) -> None:
    replacement_recorder = Recorder()
    replacement = recording_extensions(replacement_recorder, kinds=("assembly",))

    class Swapper:
        async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
            set_loaded_extensions(replacement)  # mid-run, before the lead delegates

    from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions

    ext = LoadedExtensions(
        task_lifecycle=(Contribution("swap:install", "swap", 0, "0:swap#0", Swapper()),),
        assembly_observers=recording_extensions(recorder, kinds=("assembly",)).assembly_observers,
    )
    host = make_host(make_config(memory={"enabled": False}))
    # The lead run itself is not notified by the host; the subagent's start swaps the global set.
    await host.run_lead(_delegate(), extensions=ext, task_store=ext.new_task_store("run-1"))
    assert [e for e in recorder.events if e[0] == "assembled"] == [
        ("assembled", "lead"),
        ("assembled", "general-purpose"),
    ]
    assert replacement_recorder.events == []


_in_model_call = threading.Event()


class _SlowModel(EmbeddedChatModel):
    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        _in_model_call.set()
        await asyncio.sleep(30)


async def test_a_cancelled_subagent_stops_aborted_after_lease_release(recorder: Recorder, notify_loop: Any) -> None:
    ext = recording_extensions(recorder, kinds=("lifecycle",))
    config = make_config()
    executor = SubagentExecutor(
        config,
        build_subagent=subagent_builder(config, model_factory=lambda name: _SlowModel()),
        extensions=ext,
        parent_run_id="run-1",
        thread_id="t",
    )
    _in_model_call.clear()
    running = asyncio.create_task(executor.aexecute("x"))
    assert await asyncio.to_thread(_in_model_call.wait, 5)  # started, now stuck in its first model call
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [e[0] for e in recorder.events] == ["start", "stop"] and recorder.events[-1][3] == "aborted"
    (owners,) = recorder.stop_owners
    assert f"subagent:{executor.task_id}" not in owners
