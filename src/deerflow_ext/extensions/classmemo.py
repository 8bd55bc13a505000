"""What is worked out once per class, read back at the speed of a dict lookup.

Composition, description and graph reuse each ask something of the class of every middleware
of every construction (its wrapper class, how to probe it, its slot class...). Keeping the
answers in a ``WeakKeyDictionary`` lets a class that is dropped (a test's, one made at run
time) go, but every read is a Python-level call that makes a weak reference: ~1.5K
instructions, against ~0.2K for a plain ``dict.get``, and a construction made ~100 of them.

So a :class:`ClassMemo` keeps its answers weakly, as before, and a bounded plain dict of the
same answers in front for reading: ``memo.get(cls, default)`` *is* that dict's ``get``. The
front only ever holds what the weak store holds, so an answer keeps its identity for as long
as its class lives (a generated wrapper class must stay the same class); when the front is
full it is emptied and refilled from the store, which keeps at most ``limit`` classes alive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar
from weakref import WeakKeyDictionary

__all__ = ["ClassMemo"]

V = TypeVar("V")


class ClassMemo(Generic[V]):
    """``compute(cls, *args)``, once per class while it lives (under a lock: two threads
    asking for a new class get one answer), read with :attr:`get` and worked out by
    :meth:`load`. ``args`` only help compute: the answer is per class, whatever they are."""

    __slots__ = ("_compute", "_fast", "_limit", "_lock", "_store", "get")

    def __init__(self, compute: Callable[..., V], *, limit: int = 1024) -> None:
        self._compute = compute
        self._limit = limit
        self._store: WeakKeyDictionary[type, V] = WeakKeyDictionary()
        self._fast: dict[type, V] = {}
        self._lock = threading.RLock()  # a compute may ask its own memo for another class
        #: ``get(cls, default)``: the answer for ``cls`` if it is in front, else ``default``.
        self.get = self._fast.get

    def load(self, cls: type, *args: object) -> V:
        """The answer for ``cls``: from the store, else computed and stored; then in front."""
        with self._lock:
            try:
                value = self._store[cls]
            except KeyError:
                value = self._store[cls] = self._compute(cls, *args)
            if len(self._fast) >= self._limit:
                self._fast.clear()  # the same dict: ``get`` stays bound to it
            self._fast[cls] = value
        return value

    def __call__(self, cls: type) -> V:
        """The answer for ``cls`` (a hit costs one ``dict.get`` and this call)."""
        value = self._fast.get(cls, _MISSING)
        return self.load(cls) if value is _MISSING else value  # type: ignore[return-value]


_MISSING: object = object()
