"""Turn a caller's sequence into a tuple we own.

Frozen dataclasses are only immutable by declaration while a field still points at the
caller's list: the caller can keep appending to it. Copying into a tuple at construction
is what makes a snapshot immutable in fact. A bare ``str`` is itself a ``Sequence``, so
without the special case an observer iterating the field would walk characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__: list[str] = []


def as_tuple(value: Iterable[Any] | str | bytes | None) -> tuple[Any, ...]:
    """Copy *value* into a tuple; ``None`` is empty and a lone string is one item."""
    if value is None:
        return ()
    if isinstance(value, tuple):
        return value
    if isinstance(value, (str, bytes)):
        return (value,)
    return tuple(value)
