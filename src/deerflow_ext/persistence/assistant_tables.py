"""The assistants' tables and their records: each assistant, and every version it had.

An assistant is a named configuration of the one graph (``config``, ``context``,
``metadata``, ``name``, ``description``). Each create and each update writes a version
(``assistant_versions``, numbered from 1 per assistant); the ``assistants`` row holds the
active one's fields and number, so a read or a search is one table and switching back to an
earlier version (LangGraph's ``latest``) copies that version's fields over it.

The built-in assistant ``lead_agent`` is a row like the others, written by the migration
that creates the tables (0007), so search, count and ordering need no special case; the
store refuses to change or delete it (:data:`BUILT_IN_ASSISTANT_ID`).

The tables sit on the host's ``MetaData`` (``models.Base``); importing this module is what
registers them, which the package's ``__init__`` does, so every importer of the host's
metadata sees them (autogenerate, the metadata-vs-migrations tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, ForeignKey, Integer, String, Table, Text

from .models import ASSISTANT_TABLES, Base

__all__ = [
    "ASSISTANTS",
    "ASSISTANT_COLUMNS",
    "ASSISTANT_VERSIONS",
    "BUILT_IN_ASSISTANT",
    "BUILT_IN_ASSISTANT_ID",
    "AssistantRecord",
]

BUILT_IN_ASSISTANT_ID = "lead_agent"
"""The assistant every deployment has (also the graph's id): it cannot be changed or deleted,
so a run addressed to it needs no database read to know its (empty) configuration."""


def _json(name: str) -> Column[Any]:
    return Column(name, JSON, nullable=False)


def _fields() -> list[Column[Any]]:
    """The columns an assistant and each of its versions both have."""
    return [
        Column("graph_id", String(64), nullable=False),
        Column("name", Text, nullable=False),
        Column("description", Text, nullable=True),
        _json("config"),
        _json("context"),
        _json("metadata"),
    ]


_ASSISTANTS_NAME, _VERSIONS_NAME = ASSISTANT_TABLES

ASSISTANTS = Table(
    _ASSISTANTS_NAME,
    Base.metadata,
    Column("assistant_id", String(64), primary_key=True),
    *_fields(),
    Column("version", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

ASSISTANT_VERSIONS = Table(
    _VERSIONS_NAME,
    Base.metadata,
    Column(
        "assistant_id",
        String(64),
        ForeignKey("assistants.assistant_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("version", Integer, primary_key=True),
    *_fields(),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

ASSISTANT_COLUMNS: tuple[str, ...] = tuple(ASSISTANTS.c.keys())
"""An assistant's fields, in the order LangGraph's responses list them."""


def _utc(value: datetime) -> datetime:
    # SQLite hands timestamps back without their zone; every stored time is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class AssistantRecord:
    """One assistant at its active version, or one version (``updated_at`` is then its
    ``created_at``)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    config: Mapping[str, Any]
    context: Mapping[str, Any]
    metadata: Mapping[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime = field(default=datetime.min.replace(tzinfo=UTC))

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> AssistantRecord:
        created = _utc(row["created_at"])
        return cls(
            assistant_id=row["assistant_id"],
            graph_id=row["graph_id"],
            name=row["name"],
            description=row["description"],
            config=dict(row["config"] or {}),
            context=dict(row["context"] or {}),
            metadata=dict(row["metadata"] or {}),
            version=int(row["version"]),
            created_at=created,
            updated_at=_utc(row["updated_at"]) if "updated_at" in row else created,
        )

    def fields(self) -> dict[str, Any]:
        """The columns a version shares with its assistant."""
        return {
            "graph_id": self.graph_id,
            "name": self.name,
            "description": self.description,
            "config": dict(self.config),
            "context": dict(self.context),
            "metadata": dict(self.metadata),
        }


BUILT_IN_ASSISTANT = AssistantRecord(
    assistant_id=BUILT_IN_ASSISTANT_ID,
    graph_id=BUILT_IN_ASSISTANT_ID,
    name=BUILT_IN_ASSISTANT_ID,
    description="DeerFlow's lead agent: answers, uses tools, delegates to subagents (task tool).",
    config={},
    context={},
    metadata={"created_by": "system"},
    version=1,
    created_at=datetime(2025, 1, 1, tzinfo=UTC),
    updated_at=datetime(2025, 1, 1, tzinfo=UTC),
)
"""What migration 0007 writes for the built-in assistant (the migration keeps its own copy,
as migrations must not change when this code does)."""
