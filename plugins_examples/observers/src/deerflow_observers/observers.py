"""The observers themselves, written exactly as the spec's examples.

Their log lines are their interface (operators grep for them), so the formats are the
spec's, verbatim, on the ``deerflow_observers`` logger. Every hook does bookkeeping only:
lifecycle hooks share a 3-second budget and the assembly observer blocks construction.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from threading import Lock

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

__all__ = [
    "AssemblyDriftWatcher",
    "CompactionLogger",
    "Fingerprints",
    "OutcomeTally",
    "RunClock",
    "SystemCallLogger",
    "TaskTimer",
    "logger",
]

logger = logging.getLogger("deerflow_observers")


@dataclass
class RunClock:
    """When the task started; lives in the task store and disappears with the task."""

    started: float


@dataclass
class OutcomeTally:
    """How many tasks of each kind ended with each outcome, for the whole process.

    It has its own lock because the app store protects its map, not the objects in it,
    and lead runs and subagents stop concurrently.
    """

    counts: dict[str, int] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add(self, kind: str, outcome: TaskOutcome) -> None:
        with self._lock:
            key = f"{kind}:{outcome.value}"
            self.counts[key] = self.counts.get(key, 0) + 1

    def snapshot(self) -> dict[str, int]:
        """A copy taken under the lock, so readers never see a half-updated map."""
        with self._lock:
            return dict(self.counts)


class TaskTimer:
    """Times every task and tallies its outcome.

    ``on_task_stop`` tolerates a missing clock: when an earlier contributor spent the
    notification budget, ``on_task_start`` was skipped and the elapsed time is unknown.
    """

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        task_store.set(RunClock(time.monotonic()))

    async def on_task_stop(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        info: TaskInfo,
        outcome: TaskOutcome,
    ) -> None:
        clock = task_store.get(RunClock)
        elapsed = time.monotonic() - clock.started if clock is not None else float("nan")
        app_store.get_or_init(OutcomeTally, OutcomeTally).add(info.kind, outcome)
        logger.info(
            "%s %s in thread %s ended %s after %.2fs",
            info.kind,
            info.task_id,
            info.thread_id,
            outcome.value,
            elapsed,
        )


class SystemCallLogger:
    """Logs the host's own model calls (title, goal, memory, summarization)."""

    async def on_system_model_call(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        kind: SystemOperationKind,
        request: SystemModelRequest,
        result: SystemModelResult,
    ) -> None:
        status = "failed" if result.error is not None else "ok"
        logger.info(
            "system %s call on %s: %s in %.0f ms (%d message(s), scope %s)",
            kind.value,
            request.model_name,
            status,
            result.duration_ms or 0.0,
            len(request.messages),
            task_store.scope_id,
        )


@dataclass
class Fingerprints:
    """The latest assembly fingerprint per agent name, for the whole process."""

    by_agent: dict[str, str] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def swap(self, agent: str, fingerprint: str) -> str | None:
        """Record *fingerprint* for *agent* and return the one it replaces, if any."""
        with self._lock:
            previous = self.by_agent.get(agent)
            self.by_agent[agent] = fingerprint
            return previous


class AssemblyDriftWatcher:
    """Warns when an agent is assembled with a different fingerprint than last time.

    Synchronous and cheap by contract: it runs inside agent construction.
    """

    def on_agent_assembled(self, app_store: ExtensionData, descriptor: AgentAssemblyDescriptor) -> None:
        previous = app_store.get_or_init(Fingerprints, Fingerprints).swap(descriptor.agent_name, descriptor.fingerprint)
        if previous is not None and previous != descriptor.fingerprint:
            logger.warning(
                "agent %s changed: %s -> %s",
                descriptor.agent_name,
                previous[:12],
                descriptor.fingerprint[:12],
            )


class CompactionLogger:
    """Logs which summary each compaction produced and how many messages it folded."""

    async def on_context_compacted(
        self, app_store: ExtensionData, task_store: ExtensionData, event: CompactionEvent
    ) -> None:
        logger.info(
            "%s v%s folded %d message(s) into summary %s, kept %d",
            event.transform_kind,
            event.transform_version,
            event.compacted_message_count,
            event.output_content_hash[:12],
            event.kept_message_count,
        )
