"""Process-wide memos: one mechanism, and one eviction rule, for what is worked out once.

Composition, description, notification and graph reuse ask the same questions on every
construction and every run: a class's wrapper class, a stack shape's plan, a tool's
descriptor, the contributors a notification calls. Each such table is a :class:`Memo`: a
plain dict read through its own bound ``get`` (or subscripted directly where that is
cheaper still), bounded by **the one eviction rule: when a new key would take it past its
limit, it is emptied whole**, and the asks that follow refill it.

Emptying whole rather than evicting the least recently used keeps a hit free of bookkeeping
(a hit is one C-level dict lookup, where ``functools.lru_cache`` or a weak dictionary does
Python-level work on every read). The keys are classes, stack shapes and names, of which a
Gateway has a handful; a limit is reached only when keys are made at run time, and then
starting over is as good as any order.

Two forms build on it:

* :class:`ClassMemo`, one answer per class, the classes held weakly behind the Memo: a class
  that is dropped (a test's, one made at run time) goes, and its answer keeps its identity
  for as long as the class lives (a generated wrapper class must stay the same class);
* :class:`ClassKeyMemo`, one answer per class and key (a class's generated variants), held
  the same way;
* :class:`DescriptorMemo`, the last descriptor built for each key, handed out again when a
  construction's inputs are exactly the last ones (:func:`scalar_key` says "exactly").

Tables computed once from a finite set of keys (a hook's group method, the host's ordering
roles) are ``functools.cache`` functions: nothing there is ever evicted.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar
from weakref import WeakKeyDictionary

__all__ = ["ClassKeyMemo", "ClassMemo", "DescriptorMemo", "Memo", "scalar_key"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")

_MISSING: Any = object()


class Memo(Generic[K, V]):
    """A bounded dict of answers, emptied whole when a new key would pass ``limit``.

    ``memo.get(key, default)`` *is* the dict's ``get``; a hot path may also read
    :attr:`table` directly (``memo.table[key]``). Writes go through :meth:`put`, which
    applies the eviction rule, so the dict is the same object for the memo's whole life.
    ``on_empty`` is told the answers about to be dropped (a notification plan flushes its
    meter). Called with a key, the memo answers it, computing ``compute(key)`` on a miss.

    Safe across threads as a dict is: two threads racing on a miss each compute an answer and
    either may be kept, so an answer whose identity matters is kept in a :class:`ClassMemo`.
    """

    __slots__ = ("_compute", "_limit", "_on_empty", "get", "table")

    def __init__(
        self,
        compute: Callable[[K], V] | None = None,
        *,
        limit: int = 1024,
        on_empty: Callable[[Iterable[V]], None] | None = None,
    ) -> None:
        self._compute = compute
        self._limit = limit
        self._on_empty = on_empty
        #: The answers by key: read it freely, write it only through :meth:`put`.
        self.table: dict[K, V] = {}
        #: ``get(key, default)``: the answer for ``key`` if it is here, else ``default``.
        self.get = self.table.get

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` (emptying the memo first if ``key`` is new and it is
        full) and return it."""
        table = self.table
        if len(table) >= self._limit and key not in table:
            if self._on_empty is not None:
                self._on_empty(tuple(table.values()))
            table.clear()  # the same dict: ``get`` and ``table`` stay bound to it
        table[key] = value
        return value

    def __call__(self, key: K) -> V:
        value = self.table.get(key, _MISSING)
        if value is _MISSING:
            assert self._compute is not None, "a Memo without compute is read with get()"
            value = self.put(key, self._compute(key))
        found: V = value
        return found

    def __len__(self) -> int:
        return len(self.table)

    def clear(self) -> None:
        """Forget every answer (tests; nothing is told)."""
        self.table.clear()


class ClassMemo(Generic[V]):
    """``compute(cls, *args)``, once per class while it lives (under a lock: two threads
    asking for a new class get one answer), read with :attr:`get` and worked out by
    :meth:`load`. ``args`` only help compute: the answer is per class, whatever they are.

    The answers are kept weakly, and a :class:`Memo` of the same answers stands in front for
    reading: it only ever holds what the weak store holds, so when it is emptied it is refilled
    with the same objects, and it keeps at most ``limit`` classes alive.
    """

    __slots__ = ("_compute", "_fast", "_lock", "_store", "get")

    def __init__(self, compute: Callable[..., V], *, limit: int = 1024) -> None:
        self._compute = compute
        self._store: WeakKeyDictionary[type, V] = WeakKeyDictionary()
        self._fast: Memo[type, V] = Memo(limit=limit)
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
            return self._fast.put(cls, value)

    def __call__(self, cls: type) -> V:
        """The answer for ``cls`` (a hit costs one ``dict.get`` and this call)."""
        value = self._fast.get(cls, _MISSING)
        return self.load(cls) if value is _MISSING else value


class ClassKeyMemo(Generic[K, V]):
    """``compute(cls, key)``, once per class and key while the class lives: one answer for
    two threads asking at once (under a lock), so an answer whose identity matters (a
    generated class) is the same object for every asker while it is kept. The answers of a
    class are a :class:`Memo` of its own, found through a :class:`ClassMemo`: the one
    eviction rule holds for both (keys drawn from hook names never reach the limit).
    """

    __slots__ = ("_by_class", "_compute", "_lock")

    def __init__(self, compute: Callable[[type, K], V], *, limit: int = 1024) -> None:
        self._compute = compute
        self._by_class: ClassMemo[Memo[K, V]] = ClassMemo(lambda cls: Memo(limit=limit), limit=limit)
        self._lock = threading.Lock()

    def __call__(self, cls: type, key: K) -> V:
        answers = self._by_class(cls)
        value = answers.get(key, _MISSING)
        if value is _MISSING:
            with self._lock:
                value = answers.get(key, _MISSING)
                if value is _MISSING:
                    value = answers.put(key, self._compute(cls, key))
        found: V = value
        return found


_EXACT = (str, int, bool, type(None))


def scalar_key(values: Mapping[str, Any]) -> tuple[Hashable, ...] | None:
    """A hashable key that is equal for two mappings exactly when their canonical JSON is.

    ``1 == 1.0 == True`` in Python but not in the fingerprint's JSON, so values are keyed
    with their types. ``None`` when a value is not a plain scalar (a container, a subclass):
    such a mapping is never compared, so it can never be taken for another. A float is keyed
    by its ``repr``, which tells ``0.0`` from ``-0.0`` as JSON does; the key keeps insertion
    order, which is what an observer iterating the mapping sees.
    """
    key: list[Hashable] = []
    for name, value in values.items():
        cls = type(value)
        if cls is float:
            key.append((name, float, repr(value)))
        elif cls in _EXACT:
            key.append((name, cls, value))
        else:
            return None
    return tuple(key)


class DescriptorMemo(Generic[D]):
    """The last descriptor built for each key, with the inputs it was built from.

    The spec asks for a descriptor at the end of every construction, and a Gateway constructs
    the same lead agent for every run. Freezing that descriptor's values and hashing its
    fingerprint again cost about as much as every other part of an observed construction
    together; a descriptor is deeply immutable, so when a construction's inputs are exactly
    those of the previous construction of that key, the previous descriptor *is* this one's.

    A key tells apart constructions that do not describe alike: an agent's name, or the scope
    and policy the host's middlewares are described under (``agents/lead``). A changed
    configuration replaces the entry; keys are kept in a :class:`Memo`. Safe across threads:
    an entry is replaced whole, and two constructions racing on a miss each build a correct
    descriptor.
    """

    def __init__(self, limit: int = 64) -> None:
        self._last: Memo[Hashable, tuple[tuple[object, ...], tuple[Hashable, ...], D]] = Memo(limit=limit)

    def descriptor(
        self,
        key: Hashable,
        *,
        same: tuple[object, ...],
        inputs: tuple[Hashable, ...],
        build: Callable[[], D],
    ) -> D:
        """The previous descriptor of ``key`` when every object of ``same`` is the very
        object it was last time and ``inputs`` are equal; else ``build()``, remembered for
        the next construction.

        ``same`` holds what is compared by identity (the configuration, memoised middleware
        descriptors); the entry keeps those objects alive, so no other object can take their
        identity while they are compared. ``inputs`` must be strict: strings, ``None``,
        :func:`scalar_key` values, frozen descriptors of strings, classes.
        """
        last = self._last.get(key)
        if (
            last is not None
            and len(last[0]) == len(same)
            and all(map(operator.is_, last[0], same))  # (lengths checked above)
            and last[1] == inputs
        ):
            return last[2]
        descriptor = build()
        self._last.put(key, (same, inputs, descriptor))
        return descriptor
