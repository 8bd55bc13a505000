"""Reading and writing assistants and their versions.

Statements are SQLAlchemy Core on the host's async engine, each change one transaction whose
first statement writes: on SQLite that takes the write lock before anything is read (a read
first would have to upgrade its lock, and fail when another writer came between), on
PostgreSQL it locks the assistant's row, so two updates of one assistant number their
versions one after the other. Assistants are configuration, written rarely; what a run
reads is one primary-key lookup, and the built-in assistant none (``gateway.assistants``).

Filters (metadata, graph, name), ordering, ``select``, ``limit``/``offset`` and ``count``
run in SQL (``json_match`` for metadata), so a page costs the page.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .assistant_tables import (
    ASSISTANT_COLUMNS,
    ASSISTANT_VERSIONS,
    ASSISTANTS,
    BUILT_IN_ASSISTANT_ID,
    AssistantRecord,
)
from .json_match import json_contains
from .models import utcnow
from .owner_filter import owner_condition

__all__ = [
    "AssistantChange",
    "AssistantDraft",
    "AssistantExistsError",
    "AssistantNotFoundError",
    "AssistantQuery",
    "AssistantStore",
    "BuiltInAssistantError",
    "VersionNotFoundError",
]

SortBy = Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"]


class AssistantNotFoundError(LookupError):
    def __init__(self, assistant_id: str) -> None:
        super().__init__(f"assistant {assistant_id} not found")


class VersionNotFoundError(LookupError):
    def __init__(self, assistant_id: str, version: int) -> None:
        super().__init__(f"assistant {assistant_id} has no version {version}")


class AssistantExistsError(Exception):
    def __init__(self, assistant_id: str) -> None:
        super().__init__(f"assistant {assistant_id} already exists; pass if_exists='do_nothing' to get it back")


class BuiltInAssistantError(Exception):
    """The built-in assistant is part of the Gateway, not of its data."""

    def __init__(self, action: str) -> None:
        super().__init__(
            f"assistant {BUILT_IN_ASSISTANT_ID} is built in and cannot be {action}; "
            f"create an assistant of graph '{BUILT_IN_ASSISTANT_ID}' instead"
        )


@dataclass(frozen=True)
class AssistantDraft:
    """A new assistant; ``assistant_id`` None draws a UUID."""

    graph_id: str
    name: str
    description: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    assistant_id: str | None = None


@dataclass(frozen=True)
class AssistantChange:
    """An update: each field None keeps the active version's; ``metadata`` is merged into it
    (LangGraph's update), the others replace it."""

    graph_id: str | None = None
    name: str | None = None
    description: str | None = None
    config: Mapping[str, Any] | None = None
    context: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class AssistantQuery:
    metadata: Mapping[str, Any] = field(default_factory=dict)
    graph_id: str | None = None
    name: str | None = None  # a case-insensitive substring of the name, as LangGraph matches
    limit: int = 10
    offset: int = 0
    sort_by: SortBy = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: Sequence[str] = ()
    # An authorization handler's filter on the metadata (``owner_filter``): the user's own.
    filters: Mapping[str, Any] | None = None


def _record(row: Any) -> AssistantRecord:
    return AssistantRecord.of(row._mapping)


class AssistantStore:
    """The assistants of one database, over the host's async engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name

    # -- reads --------------------------------------------------------------------------
    def _mine(self, assistant_id: str, filters: Mapping[str, Any] | None) -> ColumnElement[bool]:
        """This assistant, if its metadata matches ``filters`` (an authorization handler's)."""
        return and_(
            ASSISTANTS.c.assistant_id == assistant_id, owner_condition(ASSISTANTS.c["metadata"], filters, self._dialect)
        )

    async def get(self, assistant_id: str, filters: Mapping[str, Any] | None = None) -> AssistantRecord | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(ASSISTANTS).where(self._mine(assistant_id, filters)))).first()
        return _record(row) if row is not None else None

    async def search(self, query: AssistantQuery) -> tuple[list[dict[str, Any]], bool]:
        """The page's assistants (only the ``select`` columns, all when empty), and whether
        more match after it."""
        names = [c for c in ASSISTANT_COLUMNS if not query.select or c in query.select]
        column = ASSISTANTS.c[query.sort_by]
        order = column.asc() if query.sort_order == "asc" else column.desc()
        tie = ASSISTANTS.c.assistant_id.asc() if query.sort_order == "asc" else ASSISTANTS.c.assistant_id.desc()
        statement = (
            self._filtered(select(*(ASSISTANTS.c[n] for n in names)), query)
            .order_by(order, tie)
            .limit(query.limit + 1)
            .offset(query.offset)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        return [dict(r._mapping) for r in rows[: query.limit]], len(rows) > query.limit

    async def count(self, query: AssistantQuery) -> int:
        statement = self._filtered(select(func.count()).select_from(ASSISTANTS), query)
        async with self._engine.connect() as conn:
            return int((await conn.execute(statement)).scalar_one())

    def _filtered(self, statement: Select[Any], query: AssistantQuery) -> Select[Any]:
        conditions: list[ColumnElement[bool]] = [json_contains(ASSISTANTS.c["metadata"], query.metadata, self._dialect)]
        if query.graph_id is not None:
            conditions.append(ASSISTANTS.c.graph_id == query.graph_id)
        if query.name:
            conditions.append(func.lower(ASSISTANTS.c.name).contains(query.name.lower(), autoescape=True))
        if query.filters:
            conditions.append(owner_condition(ASSISTANTS.c["metadata"], query.filters, self._dialect))
        return statement.where(*conditions)

    async def versions(
        self,
        assistant_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        filters: Mapping[str, Any] | None = None,
    ) -> list[AssistantRecord]:
        """The assistant's versions, newest first; :class:`AssistantNotFoundError` when it
        does not exist (an assistant always has its first version)."""
        table = ASSISTANT_VERSIONS
        statement = (
            select(table)
            .where(
                table.c.assistant_id == assistant_id, json_contains(table.c["metadata"], metadata or {}, self._dialect)
            )
            .order_by(table.c.version.desc())
            .limit(limit)
            .offset(offset)
        )
        async with self._engine.connect() as conn:
            if filters and not await self._seen(conn, assistant_id, filters):  # another user's
                raise AssistantNotFoundError(assistant_id)
            rows = (await conn.execute(statement)).all()
            if not rows and await _missing(conn, assistant_id):
                raise AssistantNotFoundError(assistant_id)
        return [_record(r) for r in rows]

    async def _seen(self, conn: AsyncConnection, assistant_id: str, filters: Mapping[str, Any]) -> bool:
        found = await conn.execute(select(ASSISTANTS.c.assistant_id).where(self._mine(assistant_id, filters)))
        return found.first() is not None

    # -- writes -------------------------------------------------------------------------
    async def create(self, draft: AssistantDraft, *, if_exists: Literal["raise", "do_nothing"]) -> AssistantRecord:
        """Version 1 of a new assistant; an existing id raises :class:`AssistantExistsError`
        or, with ``do_nothing``, answers the assistant as it is."""
        now = utcnow()
        record = AssistantRecord(
            assistant_id=draft.assistant_id or str(uuid.uuid4()),
            graph_id=draft.graph_id,
            name=draft.name,
            description=draft.description,
            config=dict(draft.config),
            context=dict(draft.context),
            metadata=dict(draft.metadata),
            version=1,
            created_at=now,
            updated_at=now,
        )
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    insert(ASSISTANTS).values(
                        assistant_id=record.assistant_id, **record.fields(), version=1, created_at=now, updated_at=now
                    )
                )
                await conn.execute(_insert_version(record.assistant_id, 1, record.fields(), now))
        except IntegrityError:
            existing = await self.get(record.assistant_id)
            if existing is None:
                raise  # not a duplicate id: a constraint this code does not know of
            if if_exists == "do_nothing":
                return existing
            raise AssistantExistsError(record.assistant_id) from None
        return record

    async def update(
        self, assistant_id: str, change: AssistantChange, filters: Mapping[str, Any] | None = None
    ) -> AssistantRecord:
        """A new version from the active one and ``change``, made active (``filters``: an
        assistant whose metadata does not match is not found)."""
        _refuse_built_in(assistant_id, "changed")
        now = utcnow()
        async with self._engine.begin() as conn:
            current = await _lock(conn, assistant_id, now, self._mine(assistant_id, filters))
            last = (
                await conn.execute(
                    select(func.max(ASSISTANT_VERSIONS.c.version)).where(
                        ASSISTANT_VERSIONS.c.assistant_id == assistant_id
                    )
                )
            ).scalar_one()
            fields = current.fields()
            for name in ("graph_id", "name", "description", "config", "context"):
                value = getattr(change, name)
                if value is not None:
                    fields[name] = dict(value) if isinstance(value, Mapping) else value
            if change.metadata:
                fields["metadata"] = {**fields["metadata"], **change.metadata}
            version = int(last or current.version) + 1
            await conn.execute(_insert_version(assistant_id, version, fields, now))
            await conn.execute(_update(assistant_id).values(**fields, version=version, updated_at=now))
        return AssistantRecord(
            assistant_id=assistant_id, **fields, version=version, created_at=current.created_at, updated_at=now
        )

    async def set_latest(
        self, assistant_id: str, version: int, filters: Mapping[str, Any] | None = None
    ) -> AssistantRecord:
        """Make ``version`` the active one (its fields become the assistant's)."""
        _refuse_built_in(assistant_id, "changed")
        now = utcnow()
        table = ASSISTANT_VERSIONS
        async with self._engine.begin() as conn:
            current = await _lock(conn, assistant_id, now, self._mine(assistant_id, filters))
            row = (
                await conn.execute(
                    select(table).where(table.c.assistant_id == assistant_id, table.c.version == version)
                )
            ).first()
            if row is None:
                raise VersionNotFoundError(assistant_id, version)
            fields = _record(row).fields()
            await conn.execute(_update(assistant_id).values(**fields, version=version))
        return AssistantRecord(
            assistant_id=assistant_id, **fields, version=version, created_at=current.created_at, updated_at=now
        )

    async def delete(self, assistant_id: str, filters: Mapping[str, Any] | None = None) -> None:
        """The assistant and every version of it (``filters``: as for :meth:`update`)."""
        _refuse_built_in(assistant_id, "deleted")
        async with self._engine.begin() as conn:
            gone = await conn.execute(delete(ASSISTANTS).where(self._mine(assistant_id, filters)))
            if gone.rowcount == 0:
                raise AssistantNotFoundError(assistant_id)
            # The foreign key cascades too; said here so a database without it enforced agrees.
            await conn.execute(delete(ASSISTANT_VERSIONS).where(ASSISTANT_VERSIONS.c.assistant_id == assistant_id))


def _refuse_built_in(assistant_id: str, action: str) -> None:
    if assistant_id == BUILT_IN_ASSISTANT_ID:
        raise BuiltInAssistantError(action)


def _update(assistant_id: str) -> Any:
    return update(ASSISTANTS).where(ASSISTANTS.c.assistant_id == assistant_id)


def _insert_version(assistant_id: str, version: int, fields: Mapping[str, Any], now: Any) -> Any:
    return insert(ASSISTANT_VERSIONS).values(assistant_id=assistant_id, version=version, **fields, created_at=now)


async def _lock(conn: AsyncConnection, assistant_id: str, now: Any, mine: ColumnElement[bool]) -> AssistantRecord:
    """The assistant as it is, after a write to its row (the write lock or the row lock is
    this transaction's from here on); :class:`AssistantNotFoundError` when there is none
    (``mine``: the row's condition, with the user's filter)."""
    touched = await conn.execute(update(ASSISTANTS).where(mine).values(updated_at=now))
    if touched.rowcount == 0:
        raise AssistantNotFoundError(assistant_id)
    row = (await conn.execute(select(ASSISTANTS).where(ASSISTANTS.c.assistant_id == assistant_id))).one()
    return _record(row)


async def _missing(conn: AsyncConnection, assistant_id: str) -> bool:
    found = await conn.execute(select(ASSISTANTS.c.assistant_id).where(ASSISTANTS.c.assistant_id == assistant_id))
    return found.first() is None
