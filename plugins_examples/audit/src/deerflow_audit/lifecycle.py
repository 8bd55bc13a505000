"""The task-lifecycle contributor: records outcomes, never touches the database.

Lifecycle hooks share a 3-second budget with every other extension and ``on_task_stop``
sits in front of the stream end, so the hook only appends to the in-memory buffer.
"""

from __future__ import annotations

from datetime import UTC, datetime

from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

from .buffer import AuditBuffer, OutcomeRecord

__all__ = ["AuditTrail"]


class AuditTrail:
    """Buffers one :class:`OutcomeRecord` per task stop.

    Only the stop is recorded: an audit row states how a task ended, and a start
    without a stop (a Gateway killed mid-run) would be an unfinished claim.
    """

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        return None

    async def on_task_stop(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        info: TaskInfo,
        outcome: TaskOutcome,
    ) -> None:
        record = OutcomeRecord(
            task_id=info.task_id,
            run_id=info.run_id,
            thread_id=info.thread_id,
            kind=info.kind,
            outcome=outcome.value,
            recorded_at=datetime.now(UTC),
        )
        app_store.get_or_init(AuditBuffer, AuditBuffer).put(record)
