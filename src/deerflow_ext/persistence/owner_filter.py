"""An authorization handler's filter on a resource's metadata, as one SQL condition.

LangGraph's ``@auth.on`` handlers return filters of this shape (``Auth.types.FilterType``):
``{"key": value}`` or ``{"key": {"$eq": value}}`` keeps rows whose metadata has ``key``
equal to ``value`` (a nested object matches the keys it names: ``json_match``'s
containment); ``{"key": {"$contains": value}}`` keeps rows whose metadata ``key`` is a list
holding ``value`` (every element, when ``value`` is itself a list). Several keys must all
hold.

The condition goes into the statement that reads, counts, updates or deletes the rows, so a
user's page, count and offset are counted over what the user may see: nothing is fetched
to be dropped afterwards, and another user's row is simply not found.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import ColumnElement, String, and_, exists, func, literal, select, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.expression import cast

from .json_match import check_filter_keys, json_contains

__all__ = ["OWNER_FILTER_OPERATORS", "check_owner_filter", "owner_condition"]

OWNER_FILTER_OPERATORS = frozenset({"$eq", "$contains"})


def check_owner_filter(filters: Mapping[str, Any]) -> None:
    """``ValueError`` (one line naming the key) for a filter SQL cannot say here."""
    for key, wanted in filters.items():
        if not isinstance(key, str) or not key or '"' in key or "\\" in key:
            raise ValueError(f"filter key {key!r} must be a non-empty string without '\"' or '\\'")
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            unknown = sorted(str(k) for k in wanted if k not in OWNER_FILTER_OPERATORS)
            if unknown or len(wanted) != 1:
                raise ValueError(f"filter {key!r}: one operator of $eq, $contains, not {sorted(map(str, wanted))}")
            wanted = next(iter(wanted.values()))
        check_filter_keys({key: wanted} if not isinstance(wanted, Mapping) else wanted, f"filter.{key}")


def owner_condition(column: Any, filters: Mapping[str, Any] | None, dialect: str) -> ColumnElement[bool]:
    """``column`` (a JSON metadata column) satisfies every key of ``filters`` (checked with
    :func:`check_owner_filter`); ``true`` when there are none."""
    if not filters:
        return true()
    return and_(*_conditions(column, filters, dialect))


def _conditions(column: Any, filters: Mapping[str, Any], dialect: str) -> Iterator[ColumnElement[bool]]:
    for key, wanted in filters.items():
        if isinstance(wanted, Mapping) and "$contains" in wanted:
            yield _contains(column, key, wanted["$contains"], dialect)
        elif isinstance(wanted, Mapping) and "$eq" in wanted:
            yield json_contains(column, {key: wanted["$eq"]}, dialect)
        else:
            yield json_contains(column, {key: wanted}, dialect)


def _contains(column: Any, key: str, wanted: Any, dialect: str) -> ColumnElement[bool]:
    elements = list(wanted) if isinstance(wanted, list) else [wanted]
    if dialect == "postgresql":
        return cast(column, JSONB).contains({key: elements})
    path = f'$."{key}"'
    return and_(func.json_type(column, path) == "array", *(_sqlite_element(column, path, e) for e in elements))


def _sqlite_element(column: Any, path: str, element: Any) -> ColumnElement[bool]:
    each = func.json_each(column, path).table_valued("value", "type")
    if element is None:
        match = each.c.type == "null"
    elif isinstance(element, bool):
        match = each.c.type == ("true" if element else "false")
    elif isinstance(element, int | float):
        match = and_(each.c.type.in_(("integer", "real")), each.c.value == literal(element))
    elif isinstance(element, str):
        match = and_(each.c.type == "text", each.c.value == literal(element, String))
    else:  # an object or a list: compared as minified JSON
        match = func.json(each.c.value) == func.json(literal(json.dumps(element), String))
    return exists(select(literal(1)).select_from(each).where(match))
