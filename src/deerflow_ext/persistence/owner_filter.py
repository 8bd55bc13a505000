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

from sqlalchemy import ColumnElement, String, and_, bindparam, exists, func, literal, or_, select, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.expression import cast

from .json_match import check_filter_keys, json_contains

__all__ = [
    "OWNER_FILTER_OPERATORS",
    "bound_owner_condition",
    "check_owner_filter",
    "filter_shape",
    "filter_values",
    "owner_condition",
]

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


# -- one thread by id and filter, compiled once per filter shape -------------------------------
# A run on a user's thread reads its thread through the user's filter first. Built afresh each
# time, that read cost a served run with handlers ~5% of its instructions (the condition's
# construction, its cache key, SQLAlchemy's execution); filters of one shape (the same keys,
# operators and kinds of value: ``{"owner": <a string>}`` for every user) share one statement
# whose values are bound parameters, which ``sqlite_statements`` sends compiled.


def _kind(value: Any) -> Any:
    """What of a filter value the SQL depends on: its JSON kind, and a bool's value."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return tuple((k, _kind(v)) for k, v in value.items()) if value else "object"
    return "list"


def filter_shape(filters: Mapping[str, Any]) -> tuple[Any, ...]:
    """``filters`` (checked) without their values: what :func:`bound_owner_condition` builds from."""
    shape = []
    for key, wanted in filters.items():
        if isinstance(wanted, Mapping) and "$contains" in wanted:
            elements = wanted["$contains"]
            elements = elements if isinstance(elements, list) else [elements]
            shape.append((key, "$contains", tuple(_kind(e) for e in elements)))
        elif isinstance(wanted, Mapping) and "$eq" in wanted:
            shape.append((key, "$eq", _kind(wanted["$eq"])))
        else:
            shape.append((key, "$eq", _kind(wanted)))
    return tuple(shape)


def filter_values(filters: Mapping[str, Any], dialect: str) -> dict[str, Any]:
    """The bound values of :func:`bound_owner_condition`'s statement for ``filters``."""
    values: dict[str, Any] = {}
    for index, (key, wanted) in enumerate(filters.items()):
        if isinstance(wanted, Mapping) and "$contains" in wanted:
            elements = wanted["$contains"] if isinstance(wanted["$contains"], list) else [wanted["$contains"]]
            if dialect == "postgresql":
                values[f"owner_{index}"] = {key: elements}
            else:
                for position, element in enumerate(elements):
                    values[f"owner_{index}_{position}"] = _sqlite_value(element)
            continue
        value = wanted["$eq"] if isinstance(wanted, Mapping) and "$eq" in wanted else wanted
        if dialect == "postgresql":
            values[f"owner_{index}"] = {key: value}
        else:
            for position, (_, leaf) in enumerate(_sqlite_leaves(f'$."{key}"', value)):
                values[f"owner_{index}_{position}"] = _sqlite_value(leaf)
    return {name: value for name, value in values.items() if value is not _NO_VALUE}


_NO_VALUE = object()


def _sqlite_value(value: Any) -> Any:
    if value is None or isinstance(value, bool) or (isinstance(value, Mapping) and not value):
        return _NO_VALUE  # said by the SQL itself
    if isinstance(value, list | Mapping):
        return json.dumps(value)
    return value


def _sqlite_leaves(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """Each leaf of an equality value with its JSON path, as ``json_match`` flattens it."""
    if isinstance(value, Mapping) and value:
        for key, inner in value.items():
            yield from _sqlite_leaves(f'{path}."{key}"', inner)
    else:
        yield path, value


def bound_owner_condition(column: Any, shape: tuple[Any, ...], dialect: str) -> ColumnElement[bool]:
    """The condition :func:`owner_condition` says, for filters of ``shape``, their values
    bound parameters named as :func:`filter_values` names them."""
    conditions: list[ColumnElement[bool]] = []
    for index, (key, operator, kinds) in enumerate(shape):
        if dialect == "postgresql":
            conditions.append(cast(column, JSONB).contains(bindparam(f"owner_{index}", type_=JSONB)))
        elif operator == "$contains":
            path = f'$."{key}"'
            conditions.append(func.json_type(column, path) == "array")
            for position, kind in enumerate(kinds):
                conditions.append(_bound_element(column, path, kind, f"owner_{index}_{position}"))
        else:
            for position, (path, kind) in enumerate(_kind_leaves(f'$."{key}"', kinds)):
                conditions.append(_bound_leaf(column, path, kind, f"owner_{index}_{position}"))
    return and_(*conditions) if conditions else true()


def _kind_leaves(path: str, kind: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(kind, tuple):
        for key, inner in kind:
            yield from _kind_leaves(f'{path}."{key}"', inner)
    else:
        yield path, kind


def _number(kind: Any) -> ColumnElement[bool]:
    # Two comparisons, not IN: an IN list is expanded per call, which a statement compiled
    # once (``compiled``) cannot hold.
    return or_(kind == "integer", kind == "real")


def _bound_leaf(column: Any, path: str, kind: Any, name: str) -> ColumnElement[bool]:
    found, json_kind = func.json_extract(column, path), func.json_type(column, path)
    if kind is None:
        return json_kind == "null"
    if isinstance(kind, bool):
        return json_kind == ("true" if kind else "false")
    if kind == "number":
        return and_(_number(json_kind), found == bindparam(name))
    if kind == "text":
        return and_(json_kind == "text", found == bindparam(name, type_=String))
    if kind == "object":
        return json_kind == "object"
    return and_(json_kind == "array", found == func.json(bindparam(name, type_=String)))


def _bound_element(column: Any, path: str, kind: Any, name: str) -> ColumnElement[bool]:
    each = func.json_each(column, path).table_valued("value", "type")
    if kind is None:
        match = each.c.type == "null"
    elif isinstance(kind, bool):
        match = each.c.type == ("true" if kind else "false")
    elif kind == "number":
        match = and_(_number(each.c.type), each.c.value == bindparam(name))
    elif kind == "text":
        match = and_(each.c.type == "text", each.c.value == bindparam(name, type_=String))
    else:
        match = func.json(each.c.value) == func.json(bindparam(name, type_=String))
    return exists(select(literal(1)).select_from(each).where(match))
