"""Scoped, type-keyed state for extensions.

Extensions never keep global state; the host hands them an :class:`ExtensionData` for
the scope they run in (the process, one task, or a detached notification) and discards
it when that scope ends. Keying by the exact class of a value means two extensions can
only collide if they deliberately share a class, which is why the advice is to define a
small class for every value you keep.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ExtensionData"]

T = TypeVar("T")


class ExtensionData:
    """A thread-safe map from a type to the one value of exactly that type.

    Every method holds the same re-entrant lock, so one store can be shared by
    middleware, lifecycle hooks and observers running on different threads. The lock is
    re-entrant because ``get_or_init`` runs ``init`` while holding it, and an ``init``
    that reads another value from the same store must not deadlock.

    The store protects its own map, not the objects in it: a value updated
    concurrently needs its own lock.
    """

    __slots__ = ("_lock", "_scope_id", "_values")

    def __init__(self, scope_id: str) -> None:
        self._scope_id = scope_id
        self._lock = threading.RLock()
        self._values: dict[type[Any], Any] = {}

    @property
    def scope_id(self) -> str:
        """The scope this store belongs to; ``"detached"`` when there is no live task."""
        return self._scope_id

    def get(self, typ: type[T]) -> T | None:
        """Return the value stored under exactly *typ*, or ``None``.

        A subclass instance stored with :meth:`set` is not returned for its base class:
        keys are exact types so two extensions subclassing a shared base never see
        each other's values.
        """
        with self._lock:
            value: T | None = self._values.get(typ)
            return value

    def get_or_init(self, typ: type[T], init: Callable[[], T]) -> T:
        """Return the value under *typ*, creating it with *init* if absent.

        ``init`` runs while the lock is held, so two concurrent callers never create
        two values and one of them silently lose its writes. Keep ``init`` cheap:
        construct an empty container and do heavy work lazily inside it.

        Raises ``TypeError`` if ``init`` returns something that is not a *typ*: storing
        it would break the promise that ``get(typ)`` returns a *typ*.
        """
        with self._lock:
            if typ in self._values:
                existing: T = self._values[typ]
                return existing
            value = init()
            if not isinstance(value, typ):
                raise TypeError(f"get_or_init({typ.__qualname__}) init returned {type(value).__qualname__}")
            self._values[typ] = value
            return value

    def set(self, value: object) -> None:
        """Store *value* under ``type(value)``, replacing any previous value of that type."""
        with self._lock:
            self._values[type(value)] = value

    def remove(self, typ: type[T]) -> T | None:
        """Remove and return the value under exactly *typ*, or ``None`` if there was none."""
        with self._lock:
            value: T | None = self._values.pop(typ, None)
            return value

    def __repr__(self) -> str:
        with self._lock:
            names = sorted(t.__qualname__ for t in self._values)
        return f"ExtensionData(scope_id={self._scope_id!r}, types={names!r})"
