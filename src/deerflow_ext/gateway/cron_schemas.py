"""Request and response bodies of the crons routes, as ``langgraph_sdk``'s ``crons`` client
sends and reads them.

A cron's run fields (``input``, ``config``, ``context``, ``metadata``, ``assistant_id``,
``interrupt_*``, ``stream_*``, ``durability``, ``multitask_strategy``, ``checkpoint_during``,
``webhook``) are kept as its ``payload`` and checked at creation as the run they will start
(:class:`RunCreate`; the ``webhook`` by the Gateway's URL policy), so a payload no run would
accept is a 422 now, not a failed run at its first tick.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..persistence.json_match import check_filter_keys
from ..scheduling import CronRecord
from .schemas import ASSISTANT_ID, MAX_OFFSET, Timestamp

__all__ = [
    "RUN_FIELDS",
    "CronCount",
    "CronCreate",
    "CronOut",
    "CronPatch",
    "CronSearch",
]

RUN_FIELDS = (
    "input",
    "config",
    "context",
    "metadata",
    "assistant_id",
    "checkpoint_during",
    "interrupt_before",
    "interrupt_after",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "durability",
    "multitask_strategy",
    "webhook",
)
"""What a cron keeps of its request as the payload of each run it starts."""


def _aware(value: datetime | None) -> datetime | None:
    # A time without a zone is taken as UTC, as LangGraph's schedules are.
    return value if value is None or value.tzinfo is not None else value.replace(tzinfo=UTC)


class _CronFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Any = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    checkpoint_during: bool | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    webhook: str | None = Field(
        default=None, description="Called when each of the cron's runs ended, as a run's webhook (422 if refused)."
    )
    enabled: bool | None = None
    timezone: str | None = Field(default=None, description="An IANA time zone for the schedule; none: UTC.")
    stream_mode: Any = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    end_time: datetime | None = Field(default=None, description="No tick fires after this time.")

    @field_validator("end_time")
    @classmethod
    def _end_in_utc(cls, value: datetime | None) -> datetime | None:
        return _aware(value)

    def run_payload(self) -> dict[str, Any]:
        """The run fields this request sets (what each firing starts a run with)."""
        return {k: getattr(self, k) for k in RUN_FIELDS if k in self.model_fields_set and getattr(self, k) is not None}


class CronCreate(_CronFields):
    schedule: str = Field(description="Five cron fields (minute hour day month weekday), in UTC or `timezone`.")
    assistant_id: str = ASSISTANT_ID
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    on_run_completed: Literal["delete", "keep"] | None = Field(
        default=None, description="A stateless cron's thread after each run (default delete)."
    )

    def run_payload(self) -> dict[str, Any]:
        return {**super().run_payload(), "assistant_id": self.assistant_id}


class CronPatch(_CronFields):
    schedule: str | None = None
    on_run_completed: Literal["delete", "keep"] | None = None


_Column = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "payload",
    "user_id",
    "next_run_date",
    "metadata",
    "enabled",
]
_SortBy = Literal["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"]


class CronCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("metadata")
    @classmethod
    def _filter(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_filter_keys(value, "metadata")  # the filter is said in SQL (persistence.json_match)
        return value


class CronSearch(CronCount):
    enabled: bool | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: _SortBy = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[_Column] | None = Field(default=None, description="Only these fields of each cron (all when empty).")


class CronOut(BaseModel):
    cron_id: str
    assistant_id: str
    thread_id: str | None
    on_run_completed: str | None
    end_time: Timestamp | None
    schedule: str
    timezone: str | None
    created_at: Timestamp
    updated_at: Timestamp
    payload: dict[str, Any]
    user_id: str | None
    next_run_date: Timestamp | None
    metadata: dict[str, Any]
    enabled: bool

    @classmethod
    def of(cls, record: CronRecord) -> CronOut:
        return cls(
            cron_id=record.cron_id,
            assistant_id=record.assistant_id,
            thread_id=record.thread_id,
            on_run_completed=record.on_run_completed,
            end_time=record.end_time,
            schedule=record.schedule,
            timezone=record.timezone,
            created_at=record.created_at,
            updated_at=record.updated_at,
            payload=dict(record.payload),
            user_id=record.user_id,
            next_run_date=record.next_run_date,
            metadata=dict(record.metadata),
            enabled=record.enabled,
        )
