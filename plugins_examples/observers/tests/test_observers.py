"""The observers log exactly the spec's lines and keep the spec's state."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import deerflow_observers
import pytest
from deerflow_observers import (
    AssemblyDriftWatcher,
    CompactionLogger,
    Fingerprints,
    OutcomeTally,
    RunClock,
    SystemCallLogger,
    TaskTimer,
)

from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    CompactionEvent,
    ExtensionData,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
    TaskInfo,
    TaskOutcome,
)

LEAD = TaskInfo(task_id="t1", run_id="r1", thread_id="th1", kind="lead")


def descriptor(agent: str, prompt_hash: str) -> AgentAssemblyDescriptor:
    return AgentAssemblyDescriptor(
        namespace="deerflow",
        agent_name=agent,
        requested_model=None,
        effective_model="embedded",
        model_parameters={},
        thinking_enabled=False,
        reasoning_effort=None,
        base_prompt_hash=prompt_hash,
        tools=(),
        middlewares=(),
        deferred_tool_names=(),
        enabled_skills=(),
        effective_policies={},
    )


def test_install_is_marked_for_api_0_2_0() -> None:
    assert deerflow_observers.install.__deerflow_api__ == "0.2.0"
    assert deerflow_observers.install.__deerflow_name__ == "observers"


def test_task_timer_logs_the_spec_line_and_tallies(caplog: pytest.LogCaptureFixture) -> None:
    app, task = ExtensionData("app"), ExtensionData("t1")
    timer = TaskTimer()
    caplog.set_level(logging.INFO, logger="deerflow_observers")
    asyncio.run(timer.on_task_start(app, task, LEAD))
    assert isinstance(task.get(RunClock), RunClock)
    asyncio.run(timer.on_task_stop(app, task, LEAD, TaskOutcome.COMPLETED))
    (record,) = caplog.records
    assert record.name == "deerflow_observers"
    assert record.getMessage().startswith("lead t1 in thread th1 ended completed after 0.")
    assert app.get(OutcomeTally).counts == {"lead:completed": 1}


def test_task_timer_tolerates_a_skipped_start(caplog: pytest.LogCaptureFixture) -> None:
    app = ExtensionData("app")
    caplog.set_level(logging.INFO, logger="deerflow_observers")
    asyncio.run(TaskTimer().on_task_stop(app, ExtensionData("t1"), LEAD, TaskOutcome.FAILED))
    assert caplog.records[0].getMessage() == "lead t1 in thread th1 ended failed after nans"
    assert math.isnan(caplog.records[0].args[-1])
    assert app.get(OutcomeTally).snapshot() == {"lead:failed": 1}


def test_system_call_logger_format(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deerflow_observers")
    ok = SystemModelResult(response=object(), duration_ms=612.4)
    failed = SystemModelResult(error=RuntimeError("boom"), duration_ms=None)
    request = SystemModelRequest(messages="Title this thread", model_name="gpt-4o-mini")
    for result in (ok, failed):
        asyncio.run(
            SystemCallLogger().on_system_model_call(
                ExtensionData("app"), ExtensionData("7f3c"), SystemOperationKind.TITLE, request, result
            )
        )
    assert [r.getMessage() for r in caplog.records] == [
        "system title call on gpt-4o-mini: ok in 612 ms (1 message(s), scope 7f3c)",
        "system title call on gpt-4o-mini: failed in 0 ms (1 message(s), scope 7f3c)",
    ]


def test_drift_watcher_warns_only_when_the_fingerprint_changes(caplog: pytest.LogCaptureFixture) -> None:
    app = ExtensionData("app")
    watcher = AssemblyDriftWatcher()
    first, same = descriptor("lead", "a" * 64), descriptor("lead", "a" * 64)
    changed = descriptor("lead", "b" * 64)
    caplog.set_level(logging.INFO, logger="deerflow_observers")
    watcher.on_agent_assembled(app, first)
    watcher.on_agent_assembled(app, same)
    assert not caplog.records
    watcher.on_agent_assembled(app, changed)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    expected = f"agent lead changed: {first.fingerprint[:12]} -> {changed.fingerprint[:12]}"
    assert record.getMessage() == expected
    assert app.get(Fingerprints).by_agent == {"lead": changed.fingerprint}


def test_compaction_logger_format(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deerflow_observers")
    event = CompactionEvent(
        transform_kind="summarization",
        transform_version="1",
        source_content_hashes=("h1", "h2", "h3"),
        output_content_hash="0123456789abcdef",
        compacted_message_count=3,
        kept_message_count=2,
    )
    logger = CompactionLogger()
    asyncio.run(logger.on_context_compacted(ExtensionData("app"), ExtensionData("detached"), event))
    expected = "summarization v1 folded 3 message(s) into summary 0123456789ab, kept 2"
    assert caplog.records[0].getMessage() == expected


def test_in_a_real_host_every_task_is_timed_and_tallied(deerflow_host: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deerflow_observers")
    host = deerflow_host(deerflow_observers.install)
    outcome = host.run("delegate: list three colours")
    lines = [r.getMessage() for r in caplog.records if r.name == "deerflow_observers"]
    lead_end = f"in thread {outcome.thread_id} ended completed after "
    assert any(line.startswith("lead ") and lead_end in line for line in lines), lines
    assert any(line.startswith("subagent ") and "ended completed" in line for line in lines), lines
    assert any(line.startswith("system title call on ") for line in lines), lines
    assert host.app_store.get(OutcomeTally).snapshot() == {"lead:completed": 1, "subagent:completed": 1}
    assert host.app_store.get(Fingerprints).by_agent  # the drift watcher saw the assemblies
    assert not host.diagnostics.snapshot()
