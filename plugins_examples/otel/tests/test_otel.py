"""Spans for tasks, system model calls and assembly fingerprints."""

from __future__ import annotations

import asyncio
from typing import Any

import deerflow_otel
import pytest
from deerflow_otel import (
    FingerprintStamper,
    OtelSettings,
    SystemCallSpans,
    TaskSpans,
    TracerHandle,
    clear_spans,
    finished_spans,
)
from langchain_core.messages import AIMessage

from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    ExtensionData,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
    TaskInfo,
    TaskOutcome,
)


@pytest.fixture
def tracer() -> Any:
    clear_spans()
    handle = TracerHandle(OtelSettings(exporter="memory"))
    yield handle.tracer
    asyncio.run(handle.stop())
    clear_spans()


def _descriptor(agent: str) -> AgentAssemblyDescriptor:
    return AgentAssemblyDescriptor(
        namespace="deerflow",
        agent_name=agent,
        requested_model=None,
        effective_model="embedded",
        model_parameters={},
        thinking_enabled=False,
        reasoning_effort=None,
        base_prompt_hash=agent * 4,
        tools=(),
        middlewares=(),
        deferred_tool_names=(),
        enabled_skills=(),
        effective_policies={},
    )


def test_settings() -> None:
    assert OtelSettings.from_config({}) == OtelSettings(exporter="console", service_name="deerflow")
    with pytest.raises(ValueError, match="exporter must be one of"):
        OtelSettings.from_config({"exporter": "jaeger"})


def test_task_spans_follow_genai_conventions_and_carry_the_fingerprint(tracer: Any) -> None:
    app = ExtensionData("app")
    lead_store, sub_store = ExtensionData("t1"), ExtensionData("call-1")
    lead = TaskInfo("t1", "r1", "th1", "lead", agent_name="lead_agent")
    sub = TaskInfo("t2", "r1", "th1", "subagent", parent_task_id="t1", agent_name="general")
    spans = TaskSpans(tracer)
    stamper = FingerprintStamper()

    asyncio.run(spans.on_task_start(app, lead_store, lead))
    stamper.on_agent_assembled(app, _descriptor("lead_agent"))
    asyncio.run(spans.on_task_start(app, sub_store, sub))
    stamper.on_agent_assembled(app, _descriptor("general"))
    asyncio.run(spans.on_task_stop(app, sub_store, sub, TaskOutcome.FAILED))
    asyncio.run(spans.on_task_stop(app, lead_store, lead, TaskOutcome.COMPLETED))

    by_name = {s.name: s for s in finished_spans()}
    lead_span, sub_span = by_name["invoke_agent lead_agent"], by_name["invoke_agent general"]
    assert dict(lead_span.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "lead_agent",
        "gen_ai.conversation.id": "th1",
        "deerflow.task.id": "t1",
        "deerflow.task.kind": "lead",
        "deerflow.run.id": "r1",
        "deerflow.task.resumed": False,
        "deerflow.task.outcome": "completed",
        "deerflow.agent.fingerprint": _descriptor("lead_agent").fingerprint,
    }
    assert sub_span.attributes["deerflow.agent.fingerprint"] == _descriptor("general").fingerprint
    assert sub_span.parent.span_id == lead_span.context.span_id
    assert sub_span.status.status_code.name == "ERROR"


def test_a_skipped_start_still_reports_the_outcome(tracer: Any) -> None:
    info = TaskInfo("t9", "r9", None, "lead")
    asyncio.run(TaskSpans(tracer).on_task_stop(ExtensionData("app"), ExtensionData("t9"), info, TaskOutcome.ABORTED))
    (span,) = finished_spans()
    assert span.attributes["deerflow.task.outcome"] == "aborted"
    assert span.attributes["deerflow.task.start_observed"] is False
    assert "gen_ai.conversation.id" not in span.attributes


def test_system_call_spans_carry_usage_and_nest_under_the_task(tracer: Any) -> None:
    app, store = ExtensionData("app"), ExtensionData("t1")
    info = TaskInfo("t1", "r1", "th1", "lead")
    asyncio.run(TaskSpans(tracer).on_task_start(app, store, info))
    response = AIMessage(content="A title", usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15})
    request = SystemModelRequest(messages="title this", model_name="embedded")
    observer = SystemCallSpans(tracer)
    asyncio.run(
        observer.on_system_model_call(
            app, store, SystemOperationKind.TITLE, request, SystemModelResult(response, None, 5.0)
        )
    )
    asyncio.run(
        observer.on_system_model_call(
            app,
            ExtensionData("detached"),
            SystemOperationKind.MEMORY,
            request,
            SystemModelResult(None, asyncio.CancelledError(), 1.0),
        )
    )
    title, memory = finished_spans()
    assert title.name == "chat embedded"
    assert title.attributes["gen_ai.operation.name"] == "chat"
    assert title.attributes["gen_ai.usage.input_tokens"] == 12
    assert title.attributes["gen_ai.usage.output_tokens"] == 3
    assert title.attributes["deerflow.system.kind"] == "title"
    assert title.parent is not None and title.end_time - title.start_time == 5_000_000
    assert memory.parent is None and memory.attributes["error.type"] == "CancelledError"
    assert "gen_ai.usage.input_tokens" not in memory.attributes


def test_in_a_real_host_the_spans_router_shows_fingerprinted_task_spans(deerflow_host: Any) -> None:
    clear_spans()
    host = deerflow_host(deerflow_otel.install, {"exporter": "memory"})
    outcome = host.run("delegate: name two rivers")
    spans = host.client.get("/api/ext/otel/spans").json()["spans"]
    tasks = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "invoke_agent"]
    assert {s["attributes"]["deerflow.task.kind"] for s in tasks} == {"lead", "subagent"}
    for span in tasks:
        assert span["attributes"]["gen_ai.conversation.id"] == outcome.thread_id
        assert span["attributes"]["deerflow.task.outcome"] == "completed"
        assert len(span["attributes"]["deerflow.agent.fingerprint"]) == 64
    lead = next(s for s in tasks if s["attributes"]["deerflow.task.kind"] == "lead")
    sub = next(s for s in tasks if s["attributes"]["deerflow.task.kind"] == "subagent")
    assert sub["parent_span_id"] == lead["span_id"] and sub["trace_id"] == lead["trace_id"]
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert any(s["attributes"]["deerflow.system.kind"] == "title" for s in chats)
    assert not host.diagnostics.snapshot()
    clear_spans()
