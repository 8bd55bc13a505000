"""The contributions that turn DeerFlow events into spans.

A task span is opened in ``on_task_start`` and ended in ``on_task_stop``; the span
object itself lives in the task store (it belongs to the task), while the process-wide
map of open spans in the app store lets a subagent's span name its lead's span as parent.
The assembly observer only remembers fingerprints (it must be cheap and cannot see the
task); the task span is stamped with the fingerprint when the task stops, because the
agent is assembled after ``on_task_start`` returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from threading import Lock
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    ExtensionData,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
    TaskInfo,
    TaskOutcome,
)

__all__ = [
    "FingerprintStamper",
    "LatestFingerprints",
    "OpenTaskSpans",
    "SystemCallSpans",
    "TaskSpan",
    "TaskSpans",
]

_LEAD_NAMES = ("lead_agent", "lead")


@dataclass
class LatestFingerprints:
    """The latest assembly fingerprint per agent name (and overall), for the whole process."""

    by_agent: dict[str, str] = field(default_factory=dict)
    latest: str | None = None
    _lock: Lock = field(default_factory=Lock, repr=False)

    def record(self, agent: str, fingerprint: str) -> None:
        with self._lock:
            self.by_agent[agent] = fingerprint
            self.latest = fingerprint

    def lookup(self, info: TaskInfo) -> str | None:
        """The fingerprint of the agent that ran *info*'s task.

        Exact by ``info.agent_name`` when the host names the agent; otherwise a lead
        task matches the lead agent's conventional names, and a host with a single
        assembled agent leaves no doubt. Only then does it fall back to the latest.
        """
        with self._lock:
            if info.agent_name and info.agent_name in self.by_agent:
                return self.by_agent[info.agent_name]
            if info.kind == "lead":
                for name in _LEAD_NAMES:
                    if name in self.by_agent:
                        return self.by_agent[name]
            if len(self.by_agent) == 1:
                return next(iter(self.by_agent.values()))
            return self.latest


class FingerprintStamper:
    """Remembers each assembled agent's fingerprint; synchronous and lock-cheap."""

    def on_agent_assembled(self, app_store: ExtensionData, descriptor: AgentAssemblyDescriptor) -> None:
        app_store.get_or_init(LatestFingerprints, LatestFingerprints).record(
            descriptor.agent_name, descriptor.fingerprint
        )


@dataclass(frozen=True)
class TaskSpan:
    """The open span of the task whose store holds it."""

    span: Span


@dataclass
class OpenTaskSpans:
    """Open task spans by task id, so a subagent can parent its span on its lead's."""

    spans: dict[str, Span] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add(self, task_id: str, span: Span) -> None:
        with self._lock:
            self.spans[task_id] = span

    def get(self, task_id: str | None) -> Span | None:
        if task_id is None:
            return None
        with self._lock:
            return self.spans.get(task_id)

    def discard(self, task_id: str) -> None:
        with self._lock:
            self.spans.pop(task_id, None)


def _agent_name(info: TaskInfo) -> str:
    return info.agent_name or ("lead_agent" if info.kind == "lead" else "subagent")


class TaskSpans:
    """One ``invoke_agent`` span per task (GenAI semantic conventions)."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def _start(self, app_store: ExtensionData, info: TaskInfo, start_time: int | None = None) -> Span:
        agent = _agent_name(info)
        parent = app_store.get_or_init(OpenTaskSpans, OpenTaskSpans).get(info.parent_task_id)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "deerflow.task.id": info.task_id,
            "deerflow.task.kind": info.kind,
            "deerflow.run.id": info.run_id,
            "deerflow.task.resumed": info.resumed,
        }
        if info.thread_id:
            attributes["gen_ai.conversation.id"] = info.thread_id
        if info.parent_task_id is not None:
            attributes["deerflow.task.parent_id"] = info.parent_task_id
        return self.tracer.start_span(
            f"invoke_agent {agent}",
            context=trace.set_span_in_context(parent) if parent is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start_time,
        )

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        span = self._start(app_store, info)
        task_store.set(TaskSpan(span))
        app_store.get_or_init(OpenTaskSpans, OpenTaskSpans).add(info.task_id, span)

    async def on_task_stop(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        info: TaskInfo,
        outcome: TaskOutcome,
    ) -> None:
        held = task_store.get(TaskSpan)
        if held is None:
            # on_task_start was skipped (budget spent): still report how the task ended.
            span = self._start(app_store, info)
            span.set_attribute("deerflow.task.start_observed", False)
        else:
            span = held.span
        app_store.get_or_init(OpenTaskSpans, OpenTaskSpans).discard(info.task_id)
        span.set_attribute("deerflow.task.outcome", outcome.value)
        fingerprint = app_store.get_or_init(LatestFingerprints, LatestFingerprints).lookup(info)
        if fingerprint is not None:
            span.set_attribute("deerflow.agent.fingerprint", fingerprint)
        if outcome is TaskOutcome.FAILED:
            span.set_status(Status(StatusCode.ERROR, "task failed"))
        span.end()


class SystemCallSpans:
    """One ``chat`` span per host-owned model call, parented on the task span when there is one."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    async def on_system_model_call(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        kind: SystemOperationKind,
        request: SystemModelRequest,
        result: SystemModelResult,
    ) -> None:
        end = time.time_ns()
        start = end - int((result.duration_ms or 0.0) * 1_000_000)
        model = request.model_name or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "deerflow.system.kind": kind.value,
            "deerflow.system.message_count": len(request.messages),
        }
        usage = getattr(result.response, "usage_metadata", None)
        if isinstance(usage, dict):
            if usage.get("input_tokens") is not None:
                attributes["gen_ai.usage.input_tokens"] = int(usage["input_tokens"])
            if usage.get("output_tokens") is not None:
                attributes["gen_ai.usage.output_tokens"] = int(usage["output_tokens"])
        held = task_store.get(TaskSpan)
        span = self.tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(held.span) if held is not None else None,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if result.error is not None:
            span.set_attribute("error.type", type(result.error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(result.error).__qualname__))
        span.end(end_time=end)
