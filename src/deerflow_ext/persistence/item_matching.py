"""What the store's items are matched by: namespaces as stored text, value filters, and
namespace match conditions.

A namespace is a tuple of labels. The store keeps it as one text column, the labels joined
with dots (``a.b.c``), which is why a label may contain no dot (nor NUL, which PostgreSQL
text cannot hold) and may not be empty: then joining is reversible and "under ``(a, b)``" is
exactly ``prefix = 'a.b'`` or ``'a.b.' <= prefix < 'a.b/'``, which the database answers from its index.

Value filters are LangGraph's: ``{"field": value}`` is equality (a nested object matches the
fields it names, a list matches element by element), ``{"field": {"$op": operand}}`` applies
``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt`` or ``$lte``. An object holding an operator holds
operators only (``{"$gte": 4, "zzz": 100}`` is refused: it reads as a range, and is not one),
and an operator's operand is a value, compared literally (``{"$eq": {"$eq": 1}}`` matches the
object ``{"$eq": 1}``; it is not an operator again). They are applied in Python over the
rows the namespace selected, because SQLite and PostgreSQL query JSON in different ways; an
ordering operator compares numbers with numbers and text with text, and a field whose value
is of another kind (or missing) does not match.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import InvalidNamespaceError, MatchCondition

__all__ = [
    "FILTER_OPERATORS",
    "SEPARATOR",
    "InvalidFilterError",
    "check_filter",
    "check_labels",
    "join_namespace",
    "matches_conditions",
    "matches_filter",
    "split_namespace",
    "truncate",
]

SEPARATOR = "."

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""The comparison operators a value filter may use (LangGraph's ``SearchOp.filter``)."""


class InvalidFilterError(ValueError):
    """A value filter names an operator the store does not know."""


def check_labels(namespace: Sequence[Any], *, field: str = "namespace") -> tuple[str, ...]:
    """``namespace`` as a tuple of labels, or ``InvalidNamespaceError`` naming ``field`` and
    the label at fault (in a match condition's path ``*`` is such a label: a wildcard)."""
    labels = tuple(namespace)
    for index, label in enumerate(labels):
        where = f"{field}[{index}]"
        if not isinstance(label, str):
            raise InvalidNamespaceError(f"{where}: a namespace label must be a string, not {type(label).__name__}")
        if not label:
            raise InvalidNamespaceError(f"{where}: a namespace label cannot be empty")
        if SEPARATOR in label:
            raise InvalidNamespaceError(f"{where}: a namespace label cannot contain a dot ({label!r})")
        if "\x00" in label:
            raise InvalidNamespaceError(f"{where}: a namespace label cannot contain a NUL character")
    return labels


def join_namespace(namespace: Sequence[str]) -> str:
    """The stored form of a (checked) namespace."""
    return SEPARATOR.join(namespace)


def split_namespace(prefix: str) -> tuple[str, ...]:
    """The namespace a stored ``prefix`` holds."""
    return tuple(prefix.split(SEPARATOR)) if prefix else ()


def truncate(namespace: tuple[str, ...], max_depth: int | None) -> tuple[str, ...]:
    return namespace if max_depth is None else namespace[:max_depth]


def _path_matches(labels: Sequence[str], path: Sequence[str]) -> bool:
    return all(want == "*" or have == want for have, want in zip(labels, path, strict=True))


def matches_conditions(namespace: tuple[str, ...], conditions: Iterable[MatchCondition]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with each condition's
    path, ``*`` matching any one label."""
    for condition in conditions:
        path = tuple(condition.path)
        if len(path) > len(namespace):
            return False
        part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
        if not _path_matches(part, path):
            return False
    return True


def check_filter(filter: Mapping[str, Any] | None, *, field: str = "filter") -> None:
    """Raise ``InvalidFilterError`` naming the place of an unknown ``$`` operator, or of an
    object that mixes operators with fields, before any row is read (a filter applied lazily
    would fail only on the rows it reached)."""
    if not filter:
        return
    if not isinstance(filter, Mapping):
        raise InvalidFilterError(f"{field}: a filter must be an object")
    for name, wanted in filter.items():
        if isinstance(wanted, Mapping):
            operators = [key for key in wanted if _is_operator(key)]
            unknown = sorted(set(operators) - FILTER_OPERATORS)
            if unknown:
                known = ", ".join(sorted(FILTER_OPERATORS))
                raise InvalidFilterError(f"{field}.{name}: unknown operator {unknown[0]} (known: {known})")
            if operators and len(operators) != len(wanted):
                fields = sorted(str(key) for key in wanted if not _is_operator(key))
                raise InvalidFilterError(
                    f"{field}.{name}: an object holding operators ({', '.join(sorted(operators))}) "
                    f"cannot also hold fields ({', '.join(fields)})"
                )
            if not operators:
                check_filter(wanted, field=f"{field}.{name}")


def _is_operator(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("$")


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's ``value`` satisfies every field of a (checked) ``filter``."""
    if not filter:
        return True
    return all(_satisfies(value.get(name, _MISSING), wanted) for name, wanted in filter.items())


class _Missing:
    """A field the value does not have: equal to nothing, ordered against nothing."""


_MISSING = _Missing()


def _satisfies(have: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(_is_operator(key) for key in wanted):
            return all(_compare(have, op, operand) for op, operand in wanted.items())
        return isinstance(have, Mapping) and all(
            _satisfies(have.get(name, _MISSING), sub) for name, sub in wanted.items()
        )
    return _equal(have, wanted)


def _equal(have: Any, wanted: Any) -> bool:
    if isinstance(have, _Missing):
        return False
    if isinstance(wanted, Mapping):
        return _satisfies(have, wanted)
    if isinstance(wanted, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(wanted)
            and all(_equal(h, w) for h, w in zip(have, wanted, strict=True))
        )
    # JSON has one number type: 1 equals 1.0; true is not 1.
    if isinstance(have, bool) or isinstance(wanted, bool):
        return isinstance(have, bool) and isinstance(wanted, bool) and have == wanted
    return bool(have == wanted)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if isinstance(value, float) and math.isnan(value) else float(value)


def _same(have: Any, operand: Any) -> bool:
    """JSON equality of ``have`` and an operator's operand, taken literally: an object equals
    an object with the same keys and equal values (no operator inside it is applied)."""
    if isinstance(have, _Missing):
        return False
    if isinstance(operand, Mapping):
        return (
            isinstance(have, Mapping)
            and have.keys() == operand.keys()
            and all(_same(have[key], value) for key, value in operand.items())
        )
    if isinstance(operand, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(operand)
            and all(_same(h, o) for h, o in zip(have, operand, strict=True))
        )
    if isinstance(have, Mapping | list | tuple):
        return False
    return _equal(have, operand)


def _compare(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _same(have, operand)
    if op == "$ne":
        return not _same(have, operand)
    left: Any
    right: Any
    left, right = _number(have), _number(operand)
    if left is None or right is None:
        if not (isinstance(have, str) and isinstance(operand, str)):
            return False
        left, right = have, operand
    if op == "$gt":
        return bool(left > right)
    if op == "$gte":
        return bool(left >= right)
    if op == "$lt":
        return bool(left < right)
    return bool(left <= right)  # $lte: check_filter let nothing else through
