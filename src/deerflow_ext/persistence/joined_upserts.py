"""The upserts of one batch as one statement: each kind's rows sent as arrays and unnested.

Why: a batch of the checkpointer's writes (``pg_loop_writes``) sent each kind of
statement LangGraph uses as its own ``executemany``: up to three round trips and three
commits a batch, and a commit is most of what a statement costs PostgreSQL. One trivial
run's writes as one statement cost the client 0.60x the CPU, PostgreSQL 0.59x, in 0.54x
the wall time (``benchmarks/pg_write_batches.py``, 2026-12-04). It pays in the Gateway only
because a run's writes are also gathered into one batch (``pg_loop_writes``).

Only one form is joined, the form of LangGraph's four write statements::

    INSERT INTO t (a, b, ...) VALUES ($1, $2, ...)
    ON CONFLICT (a, ...) DO NOTHING | DO UPDATE SET b = EXCLUDED.b, ...

Each becomes ``INSERT INTO t (a, b, ...) SELECT * FROM unnest($i::type[], ...) ON CONFLICT
...``, all but the last in a data-modifying ``WITH``: one statement, one commit. It leaves
what the rows sent one after another would leave. One ``INSERT ... ON CONFLICT DO UPDATE``
may not touch a row twice, so rows of one key are merged first: ``DO NOTHING`` keeps the
first, ``DO UPDATE`` the first's other columns and the last's updated ones (the first
inserts, the others update). Not joined, and sent as before: a statement of any other form;
two kinds into one table (their rows could meet, and the parts of one statement all see
the same snapshot, not each other's rows); a parameter whose type is an array (``unnest``
would flatten it); a key whose values cannot be compared in Python (not hashable). A kind
with no rows (an ``executemany`` of none) is left out: it sends nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asyncpg.types import Type

from deerflow_ext.memo import Memo

__all__ = ["Joined", "Upsert", "joined", "upsert"]

_NAMES = r"\s*\w+(?:\s*,\s*\w+)*\s*"
_FORM = re.compile(
    rf"\s*INSERT\s+INTO\s+(?P<table>\w+)\s*\((?P<columns>{_NAMES})\)\s*"
    r"VALUES\s*\((?P<values>\s*\$\d+(?:\s*,\s*\$\d+)*\s*)\)\s*"
    rf"(?P<conflict>ON\s+CONFLICT\s*\((?P<key>{_NAMES})\)\s*DO\s+(?:NOTHING|UPDATE\s+SET\s+(?P<set>.+?)))\s*;?\s*",
    re.IGNORECASE | re.DOTALL,
)
_FROM_EXCLUDED = re.compile(r"\s*(\w+)\s*=\s*EXCLUDED\s*\.\s*(\w+)\s*", re.IGNORECASE)


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip().lower() for name in text.split(","))


@dataclass(frozen=True, slots=True)
class Upsert:
    """One statement of the joinable form: its table, columns, the positions of its conflict
    key and of the columns it updates (``None``: ``DO NOTHING``), and its ``ON CONFLICT``."""

    table: str
    columns: tuple[str, ...]
    key: tuple[int, ...]
    updated: tuple[int, ...] | None
    conflict: str


def _upsert(sql: str) -> Upsert | None:
    """``sql`` (asyncpg's numbered form) as an :class:`Upsert`; ``None`` if it is of any other form."""
    match = _FORM.fullmatch(sql)
    if match is None:
        return None
    columns = _names(match["columns"])
    placeholders = [value.strip() for value in match["values"].split(",")]
    if placeholders != [f"${n}" for n in range(1, len(columns) + 1)] or len(set(columns)) != len(columns):
        return None
    key = _names(match["key"])
    if not set(key) <= set(columns):
        return None
    updated: tuple[int, ...] | None = None
    if match["set"] is not None:
        pairs = [_FROM_EXCLUDED.fullmatch(item) for item in match["set"].split(",")]
        if any(pair is None or pair[1].lower() != pair[2].lower() for pair in pairs):
            return None  # anything but "c = EXCLUDED.c"
        targets = [pair[1].lower() for pair in pairs if pair is not None]
        if not set(targets) <= set(columns):
            return None
        updated = tuple(columns.index(target) for target in targets)
    conflict = match["conflict"]
    return Upsert(match["table"].lower(), columns, tuple(columns.index(name) for name in key), updated, conflict)


#: ``upsert(sql)``: :func:`_upsert`, once per statement (``memo.py``; the checkpointer's are few).
upsert: Memo[str, Upsert | None] = Memo(_upsert, limit=64)


@dataclass(frozen=True, slots=True)
class Joined:
    """One statement for several upserts' rows, and its arguments: one array per column."""

    sql: str
    arrays: tuple[list[Any], ...]


def joined(parts: Sequence[tuple[str, Sequence[Type], Sequence[tuple[Any, ...]]]]) -> Joined | None:
    """The statements ``parts`` (each: asyncpg's numbered SQL, its parameters' types and its
    rows, in the order they are to be sent) as one; ``None`` when they cannot be joined
    (see the module docstring) or have no rows, for the caller to send them as they are."""
    forms: list[tuple[Upsert, tuple[Type, ...]]] = []
    arrays: list[list[Any]] = []
    for sql, types, rows in parts:
        if not rows:
            continue  # an ``executemany`` of no rows sends nothing
        form = upsert(sql)
        if form is None or any(parameter.kind != "scalar" for parameter in types):
            return None
        try:
            merged = _merged(form, rows)
        except TypeError:  # a key value that is not hashable
            return None
        forms.append((form, tuple(types)))
        arrays += [list(column) for column in zip(*merged, strict=True)]
    if not forms or len({form.table for form, _ in forms}) != len(forms):
        return None
    return Joined(_statement(tuple(forms)), tuple(arrays))


def _merged(form: Upsert, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` with one row a key: what sending them one after another would leave."""
    by_key: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for row in rows:
        key = tuple(row[index] for index in form.key)
        first = by_key.get(key)
        if first is None:
            by_key[key] = row
        elif form.updated is not None:
            merged = list(first)
            for index in form.updated:
                merged[index] = row[index]
            by_key[key] = tuple(merged)
    return list(by_key.values())


def _joined(forms: tuple[tuple[Upsert, tuple[Type, ...]], ...]) -> str:
    inserts = []
    number = 0
    for form, types in forms:
        casts = []
        for parameter in types:
            number += 1
            casts.append(f'${number}::"{parameter.schema}"."{parameter.name}"[]')
        inserts.append(
            f"INSERT INTO {form.table} ({', '.join(form.columns)}) "
            f"SELECT * FROM unnest({', '.join(casts)}) {form.conflict}"
        )
    *first, last = inserts
    if not first:
        return last
    return "WITH " + ", ".join(f"j{n} AS ({insert})" for n, insert in enumerate(first)) + " " + last


#: The joined statement of a batch's forms, once per combination (``memo.py``).
_statement: Memo[tuple[tuple[Upsert, tuple[Type, ...]], ...], str] = Memo(_joined, limit=64)
