"""A JSON column "contains" a filter, as one SQL condition on SQLite and on PostgreSQL.

LangGraph's metadata filters (assistant search, versions) keep a row when every key of the
filter is in the row's JSON with an equal value; a nested object matches when its own keys
do. PostgreSQL says exactly that with ``jsonb @>``. SQLite has no containment operator, so
the filter is flattened into its leaves, each compared by JSON type and value at its path
(``json_type`` tells ``1`` from ``true`` and ``"1"``). One difference remains, and is stated
rather than hidden: on SQLite a list in the filter must equal the stored list, where
PostgreSQL's ``@>`` also accepts a stored list that holds more elements.

Filtering in SQL lets ``limit``/``offset`` and ``count`` run in the database instead of
over every row built in Python.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import ColumnElement, String, and_, cast, func, literal, true
from sqlalchemy.dialects.postgresql import JSONB

__all__ = ["MAX_FILTER_KEYS", "check_filter_keys", "json_contains"]

MAX_FILTER_KEYS = 100
"""The most values (leaves, nested objects' included) one metadata or values filter may name.

Each is a condition of its own on SQLite: thousands made one expression SQLite refused as
"too large" after SQLAlchemy had spent seconds of the event loop building it."""

_INT64 = (-(2**63), 2**63 - 1)  # what SQLite binds; a larger integer raised OverflowError


def check_filter_keys(wanted: Mapping[str, Any], field: str) -> None:
    """Refuse (``ValueError`` naming ``field`` and the limit) a filter SQL cannot say: a key a
    SQLite JSON path cannot quote, more than :data:`MAX_FILTER_KEYS` values, an integer out
    of SQLite's 64-bit range, a number that is not finite."""
    count = _check(wanted, field)
    if count > MAX_FILTER_KEYS:
        raise ValueError(f"{field}: a filter names at most {MAX_FILTER_KEYS} values, this one {count}")


def _check(wanted: Mapping[str, Any], field: str) -> int:
    count = 0
    for key, value in wanted.items():
        if '"' in key or "\\" in key:
            raise ValueError(f"{field}: filter key {key!r} may not contain '\"' or '\\'")
        if isinstance(value, Mapping) and value:
            count += _check(value, f"{field}.{key}")
            continue
        count += 1
        if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"{field}.{key}: an integer in a filter lies within -2**63 .. 2**63-1")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{field}.{key}: a number in a filter must be finite")
    return count


def json_contains(column: Any, wanted: Mapping[str, Any], dialect: str) -> ColumnElement[bool]:
    """``column`` holds every key of ``wanted`` with an equal value (``true`` when empty)."""
    if not wanted:
        return true()
    if dialect == "postgresql":
        return cast(column, JSONB).contains(dict(wanted))
    return and_(*_leaves(column, "$", wanted))


def _leaves(column: Any, path: str, wanted: Mapping[str, Any]) -> Iterator[ColumnElement[bool]]:
    for key, value in wanted.items():
        at = f'{path}."{key}"'
        if isinstance(value, Mapping) and value:
            yield from _leaves(column, at, value)
        else:
            yield _leaf(column, at, value)


def _leaf(column: Any, path: str, value: Any) -> ColumnElement[bool]:
    kind = func.json_type(column, path)
    found = func.json_extract(column, path)
    if value is None:
        return kind == "null"
    if isinstance(value, bool):  # before int: a bool is an int to Python
        return kind == ("true" if value else "false")
    if isinstance(value, int | float):
        return and_(kind.in_(("integer", "real")), found == literal(value))
    if isinstance(value, str):
        return and_(kind == "text", found == literal(value, String))
    if isinstance(value, Mapping):  # an empty object: any object there
        return kind == "object"
    # A list: SQLite renders an extracted array minified, as json() renders the filter's.
    return and_(kind == "array", found == func.json(literal(json.dumps(value), String)))
