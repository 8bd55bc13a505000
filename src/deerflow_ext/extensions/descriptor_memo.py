"""Descriptors handed out again when a construction describes the same agent as the last one.

The spec asks for a descriptor at the end of every construction, and a Gateway constructs
the same lead agent for every run: the same middleware classes with the same policy values,
the same tools, the same configuration. Freezing that descriptor's values and hashing its
fingerprint again (a JSON serialisation of ~240 values) cost about as much as every other
part of an observed construction together. A descriptor is deeply immutable, so when a
construction's inputs are exactly those of the previous construction of that agent, the
previous descriptor *is* this construction's descriptor, and it is handed out again.

"Exactly" is strict on purpose. ``1 == 1.0 == True`` in Python but not in the fingerprint's
JSON, so values are compared with their types (:func:`scalar_key`); anything that is not a
plain scalar is not compared at all and makes the construction build a new descriptor.
The configuration is compared by identity: ``AppConfig`` is frozen, and everything the
descriptor derives from it (model parameters, effective policies, the policy snapshot) is a
function of it, the scope and the names in the key.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["DescriptorMemo", "scalar_key"]

_EXACT = (str, int, bool, type(None))
D = TypeVar("D")


def scalar_key(values: Mapping[str, Any]) -> tuple[Hashable, ...] | None:
    """A hashable key that is equal for two mappings exactly when their canonical JSON is.

    ``None`` when a value is not a plain scalar (a container, a subclass): such a mapping is
    never compared, so it can never be taken for another. A float is keyed by its ``repr``,
    which tells ``0.0`` from ``-0.0`` as JSON does; the key keeps insertion order, which is
    what an observer iterating the mapping sees.
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

    A key is what tells apart constructions that do not describe alike: an agent's name
    (a Gateway builds a handful of agents: the lead, each subagent kind), or the scope and
    policy the host's middlewares are described under (``agents/lead``). A changed
    configuration simply replaces the entry; past ``limit`` keys the memo starts over, so
    keys made at run time cannot grow it. Safe across threads: an entry is replaced whole,
    and two constructions racing on a miss each build a correct descriptor.
    """

    def __init__(self, limit: int = 64) -> None:
        self._last: dict[Hashable, tuple[tuple[object, ...], tuple[Hashable, ...], D]] = {}
        self._lock = threading.Lock()
        self._limit = limit

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
        with self._lock:
            last = self._last.get(key)
        if (
            last is not None
            and len(last[0]) == len(same)
            and all(map(operator.is_, last[0], same))  # (lengths checked above)
            and last[1] == inputs
        ):
            return last[2]
        descriptor = build()
        with self._lock:
            if len(self._last) >= self._limit and key not in self._last:
                self._last.clear()
            self._last[key] = (same, inputs, descriptor)
        return descriptor
