"""Request and response bodies of the host routes (DESIGN.md section 7).

Request models forbid unknown keys: a misspelt ``gaol`` would otherwise run without the goal
the client meant to set, and the client would never learn why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..persistence.records import RunRecord, ThreadRecord

__all__ = [
    "MessageIn",
    "RunCreate",
    "RunInput",
    "RunOut",
    "ThreadCreate",
    "ThreadCreated",
    "ThreadOut",
    "TokenUsageOut",
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(_Request):
    role: Literal["user", "human", "assistant", "ai", "system"]
    content: str | list[dict[str, Any]]


class RunInput(_Request):
    messages: list[MessageIn] = Field(min_length=1)


class RunCreate(_Request):
    input: RunInput
    goal: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)


class ThreadCreate(_Request):
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadCreated(BaseModel):
    thread_id: str


class ThreadOut(BaseModel):
    thread_id: str
    title: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]

    @classmethod
    def of(cls, record: ThreadRecord) -> ThreadOut:
        return cls(
            thread_id=record.id,
            title=record.title,
            status=record.status,
            created_at=record.created_at,
            updated_at=record.updated_at,
            metadata=record.metadata,
        )


class TokenUsageOut(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class RunOut(BaseModel):
    run_id: str
    thread_id: str
    status: str
    outcome: str | None
    input: dict[str, Any]
    answer: str | None
    error: str | None
    token_usage: TokenUsageOut
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, record: RunRecord) -> RunOut:
        return cls(
            run_id=record.id,
            thread_id=record.thread_id,
            status=record.status,
            outcome=record.outcome,
            input=record.input,
            answer=record.answer,
            error=record.error,
            token_usage=TokenUsageOut(
                input_tokens=record.tokens.input_tokens,
                output_tokens=record.tokens.output_tokens,
                total_tokens=record.tokens.total_tokens,
            ),
            created_at=record.created_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
        )
