"""A statement LangGraph wrote for psycopg, in the form asyncpg takes.

The PostgreSQL checkpointer sends LangGraph's own SQL from the event loop (its writes,
``pg_loop_writes``; its reads of one checkpoint, ``pg_loop_reads``). LangGraph writes that
SQL for psycopg: ``%s`` placeholders, JSON values wrapped in ``Json``/``Jsonb``, and any
Python value bound wherever, left to PostgreSQL's casts. asyncpg numbers its placeholders
(``$1``), encodes by each parameter's type as the server describes it, and casts nothing.
This module is that translation, in one place for both directions of traffic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg
from asyncpg.types import Type
from psycopg.types.json import Json, Jsonb

__all__ = ["asyncpg_form", "asyncpg_rows", "numbered", "parameter_types"]

_PLACEHOLDER = re.compile(r"%%|%s|%")


@functools.cache
def numbered(query: str) -> str:
    """A psycopg query's ``%s`` placeholders as asyncpg's ``$1, $2, ...`` (``%%`` as ``%``);
    ``ValueError`` for any other ``%`` (a named placeholder, which LangGraph's checkpoint
    statements do not use)."""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        if match.group() == "%":
            raise ValueError(f"a query with placeholders other than %s: {query!r}")
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(swap, query)


def _value(value: Any, text: bool) -> Any:
    """A psycopg parameter as asyncpg takes it. JSON wrappers unwrapped: the connection's
    codecs write JSON as ``json.dumps``, as psycopg's default does. A number for a text
    parameter as its text: psycopg sends it as a number and PostgreSQL's assignment cast
    makes it text (a channel version may be an int), asyncpg wants the text itself."""
    if isinstance(value, Json | Jsonb):
        return value.obj
    if text and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


_TEXT_TYPES = frozenset({"text", "varchar", "bpchar"})
_types: dict[str, tuple[Type, ...]] = {}
"""Each query's parameter types (asyncpg's form): fixed by the schema, asked once."""


async def parameter_types(connection: asyncpg.Connection, query: str) -> tuple[Type, ...]:
    """The types of ``query``'s parameters (asyncpg's form), as the server describes them;
    the first time a query is seen they are asked over ``connection`` (one prepare, the
    statement asyncpg would prepare anyway), then remembered."""
    types = _types.get(query)
    if types is None:
        prepared = await connection.prepare(query)
        types = _types[query] = tuple(prepared.get_parameters())
    return types


@functools.cache
def _texts(types: tuple[Type, ...]) -> tuple[bool, ...]:
    return tuple(parameter.name in _TEXT_TYPES for parameter in types)


def asyncpg_rows(rows: Iterable[Sequence[Any]], types: tuple[Type, ...]) -> list[tuple[Any, ...]]:
    """Each row of a query's parameters (psycopg's values) as asyncpg takes them, given the
    query's parameter ``types`` (:func:`parameter_types`)."""
    texts = _texts(types)
    return [tuple(_value(value, text) for value, text in zip(row, texts, strict=True)) for row in rows]


async def asyncpg_form(
    connection: asyncpg.Connection, query: str, rows: Iterable[Sequence[Any]]
) -> tuple[str, list[tuple[Any, ...]]]:
    """``query`` (psycopg's) numbered, and each row of its parameters as asyncpg takes them."""
    sql = numbered(query)
    return sql, asyncpg_rows(rows, await parameter_types(connection, sql))
