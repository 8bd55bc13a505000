"""Acceptance: one lead run touching every extension point yields the spec's event sequence.

The run delegates to a subagent, titles the thread, needs a goal continuation (which pushes
the thread past the summarization trigger), and schedules memory extraction that runs on the
host's flush. A recording extension of every kind sees it all.
"""

from __future__ import annotations

from typing import Any

from agent_helpers import Recorder, make_config, recording_extensions
from langchain_core.messages import HumanMessage

from deerflow_ext.agents.prompts import SUMMARY_MESSAGE_PREFIX
from deerflow_ext.client import DeerFlowClient
from deerflow_extension_api import canonical_hash


async def test_one_lead_run_produces_the_spec_event_sequence(recorder: Recorder, notify_loop: Any) -> None:
    ext = recording_extensions(recorder)
    config = make_config(summarization={"trigger_messages": 4, "keep_messages": 2}, goal={"max_continuations": 3})
    client = DeerFlowClient(config, extensions=ext)

    result = await client.arun("delegate: sum the numbers", thread_id="t-acc", goal="finish after 2 turns")
    await client.aclose()  # flush memory extraction
    await notify_loop.drain(2.0)

    lead_id = next(i.task_id for i in recorder.infos if i.kind == "lead")
    sub_id = next(i.task_id for i in recorder.infos if i.kind == "subagent")
    assert recorder.sequence(without=("compaction",)) == [
        ("start", "lead", lead_id),  # before the graph is built
        ("contribute", "lead"),
        ("assembled", "lead"),
        ("start", "subagent", sub_id),  # nested inside the lead task
        ("contribute", "general-purpose"),
        ("assembled", "general-purpose"),
        ("stop", "subagent", sub_id, "completed"),
        ("system", "title"),  # after the first exchange
        ("system", "goal"),  # not met: one continuation
        ("system", "summarization"),  # the continuation pushed the thread past the trigger
        ("system", "goal"),  # met
        ("stop", "lead", lead_id, "completed"),
        ("system", "memory"),  # extraction after the run, on flush
    ]
    assert (result.continuations, result.goal_met, result.title) == (1, True, "Delegate: sum the numbers")

    subagent = next(i for i in recorder.infos if i.kind == "subagent")
    assert subagent.parent_task_id == lead_id and subagent.run_id == lead_id
    assert [i.agent_name for i in recorder.infos] == ["lead", "general-purpose"]
    # The subagent's stop came after its sandbox lease was returned.
    assert not any(owner.startswith("subagent:") for owner in recorder.stop_owners[0])

    # Calls made inside the lead task see its task store; memory runs after it, detached.
    lead_store = recorder.task_stores[lead_id]
    stores = [(kind.value, store) for kind, _, _, store in recorder.system_calls]
    assert [kind for kind, _ in stores] == ["title", "goal", "summarization", "goal", "memory"]
    assert all(store is lead_store for kind, store in stores if kind != "memory")
    assert stores[-1][1] is not lead_store and stores[-1][1].scope_id == "detached"

    (event,) = recorder.compactions
    state = (
        await client.host.make_lead_agent(extensions=ext).aget_state({"configurable": {"thread_id": "t-acc"}})
    ).values
    summary = state["messages"][0]
    assert isinstance(summary, HumanMessage) and summary.text.startswith(SUMMARY_MESSAGE_PREFIX)
    assert event.output_content_hash == canonical_hash(summary.content)
    assert event.compacted_message_count == 3 and event.run_id == lead_id and event.thread_id == "t-acc"

    lead_desc = next(d for d in recorder.descriptors if d.agent_name == "lead")
    sub_desc = next(d for d in recorder.descriptors if d.agent_name == "general-purpose")
    assert {t.name for t in lead_desc.tools} >= {"task", "calculator", "current_time", "ask_clarification"}
    assert "task" not in {t.name for t in sub_desc.tools}
    assert lead_desc.middlewares[0].name == "ThreadDataMiddleware"
    assert lead_desc.middlewares[-1].name == "ClarificationMiddleware"
    assert sub_desc.effective_policies["host_policy"]["max_subagents_per_run"] == 0


async def test_assembly_fingerprint_is_stable_across_runs_and_ignores_memory(recorder: Recorder) -> None:
    ext = recording_extensions(recorder, kinds=("assembly",))
    client = DeerFlowClient(make_config(memory={"enabled": True, "debounce_seconds": 0}), extensions=ext)
    await client.arun("my name is Ada", thread_id="t")
    await client.aclose()
    assert client.host.memory.facts("t")  # facts now exist and are injected into the next run's prompt
    await client.arun("what is my name?", thread_id="t")
    first, second = (d for d in recorder.descriptors if d.agent_name == "lead")
    assert first.base_prompt_hash == second.base_prompt_hash
    assert first.fingerprint == second.fingerprint
