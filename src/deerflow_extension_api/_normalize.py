"""Turn a caller's sequence into a tuple we own.

Frozen dataclasses are only immutable by declaration while a field still points at the
caller's list: the caller can keep appending to it. Copying into a tuple at construction
is what makes a snapshot immutable in fact.

The rule is DeerFlow's: a ``Sequence`` is copied item by item; anything else is *one*
item. A bare ``str`` is itself a ``Sequence`` and a single message ``dict`` is iterable,
so copying either item by item would hand an observer characters or keys instead of the
one prompt or message the call site passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__: list[str] = []


def as_tuple(value: object) -> tuple[Any, ...]:
    """*value* as a tuple: a tuple as is, another sequence copied, anything else one item."""
    if isinstance(value, tuple):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return tuple(value)
    return (value,)
