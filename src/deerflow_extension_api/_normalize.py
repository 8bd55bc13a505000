"""Turn a caller's sequence into a tuple we own, and a caller's mapping into one nobody can change.

Frozen dataclasses are only immutable by declaration while a field still points at the
caller's list or dict: the caller can keep appending to it, and a fingerprint computed at
construction would then describe values the descriptor no longer holds. Copying at
construction is what makes a snapshot immutable in fact.

The rule is DeerFlow's: a ``Sequence`` is copied item by item; anything else is *one*
item. A bare ``str`` is itself a ``Sequence`` and a single message ``dict`` is iterable,
so copying either item by item would hand an observer characters or keys instead of the
one prompt or message the call site passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NoReturn

__all__: list[str] = []


def as_tuple(value: object) -> tuple[Any, ...]:
    """*value* as a tuple: a tuple as is, another sequence copied, anything else one item."""
    if isinstance(value, tuple):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return tuple(value)
    return (value,)


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only: the contract's values are frozen")


class _Frozen:
    """What a read-only copy shares: it pickles as its plain type's copy, and copying it
    (shallow or deep) returns itself, since it can never change."""

    __slots__ = ()
    _plain: ClassVar[type]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (type(self)._plain(self),))

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self


class ReadOnlyDict(_Frozen, dict[str, Any]):
    """A ``dict`` copy that refuses every change.

    A ``dict`` subclass rather than ``types.MappingProxyType`` so that the frozen value
    still compares, prints, serialises (``json``), pickles and deep-copies exactly like
    the ``dict`` the caller passed: observers that test ``isinstance(value, dict)`` or
    compare against a literal keep working, and ``hash()`` of the dataclass still
    raises as it did for a ``dict`` field.
    """

    __slots__ = ()
    _plain = dict
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only


class ReadOnlyList(_Frozen, list[Any]):
    """A ``list`` copy that refuses every change; see :class:`ReadOnlyDict` for why a subclass."""

    __slots__ = ()
    _plain = list
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = clear = extend = insert = pop = remove = reverse = sort = _read_only


def frozen_mapping(value: Mapping[str, Any], *, deep: bool = True) -> Mapping[str, Any]:
    """A read-only copy of *value*; with ``deep`` its nested dicts and lists are frozen too.

    ``deep`` is for values that are hashed (a fingerprint must describe what the
    descriptor holds for its whole life); a run config passed to observers is copied one
    level only, because its nested values are live objects (callbacks) the host owns.
    A value that is not a mapping is returned as it is, so a wrong type still fails
    where it did (the fingerprint's serialiser names it).
    """
    if not isinstance(value, Mapping):
        return value
    if not deep:
        return value if isinstance(value, ReadOnlyDict) else ReadOnlyDict(value)
    frozen = _frozen(value, set())
    assert isinstance(frozen, ReadOnlyDict)
    return frozen


def _frozen(value: object, path: set[int]) -> object:
    """*value* with its dicts and lists replaced by read-only copies.

    ``path`` holds the containers being copied above this one: a container that holds
    itself is left as it is, so the fingerprint's serialiser still reports the cycle.
    """
    if isinstance(value, ReadOnlyDict | ReadOnlyList) or not isinstance(value, Mapping | list | tuple):
        return value
    if id(value) in path:
        return value
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            return ReadOnlyDict({key: _frozen(item, path) for key, item in value.items()})
        if isinstance(value, list):
            return ReadOnlyList(_frozen(item, path) for item in value)
        if type(value) is tuple:
            return tuple(_frozen(item, path) for item in value)
        return value  # a named tuple or another tuple subclass keeps its type
    finally:
        path.discard(id(value))
