from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass

import pytest

from deerflow_extension_api import ExtensionData


@dataclass
class Base:
    value: int = 0


@dataclass
class Child(Base):
    pass


def test_scope_id_is_read_only() -> None:
    store = ExtensionData("task-1")
    assert store.scope_id == "task-1"
    with pytest.raises(AttributeError):
        store.scope_id = "other"  # type: ignore[misc]


def test_uses_slots() -> None:
    with pytest.raises(AttributeError):
        ExtensionData("x").anything = 1  # type: ignore[attr-defined]


def test_keyed_by_exact_type() -> None:
    store = ExtensionData("s")
    base, child = Base(1), Child(2)
    store.set(base)
    assert store.get(Base) is base
    assert store.get(Child) is None
    store.set(child)
    assert store.get(Base) is base
    assert store.get(Child) is child


def test_set_replaces_same_type() -> None:
    store = ExtensionData("s")
    store.set(Base(1))
    replacement = Base(2)
    store.set(replacement)
    assert store.get(Base) is replacement


def test_remove_returns_value_then_none() -> None:
    store = ExtensionData("s")
    value = Base(3)
    store.set(value)
    assert store.remove(Child) is None
    assert store.remove(Base) is value
    assert store.remove(Base) is None
    assert store.get(Base) is None


def test_get_or_init_creates_once() -> None:
    store = ExtensionData("s")
    calls: list[int] = []

    def init() -> Base:
        calls.append(1)
        return Base(7)

    first = store.get_or_init(Base, init)
    second = store.get_or_init(Base, init)
    assert first is second
    assert calls == [1]


def test_get_or_init_init_may_use_the_store() -> None:
    # init runs under the lock; the lock is re-entrant so this must not deadlock.
    store = ExtensionData("s")
    store.set(Base(5))

    def init() -> Child:
        seed = store.get(Base)
        assert seed is not None
        return Child(seed.value + 1)

    assert store.get_or_init(Child, init).value == 6


def test_get_or_init_rejects_wrong_type() -> None:
    store = ExtensionData("s")
    with pytest.raises(TypeError):
        store.get_or_init(Child, lambda: Base())  # type: ignore[arg-type, return-value]
    assert store.get(Child) is None


def test_repr_names_scope_and_types() -> None:
    store = ExtensionData("detached")
    store.set(Base())
    assert repr(store) == "ExtensionData(scope_id='detached', types=['Base'])"


def _key_types(count: int) -> list[type]:
    return [type(f"Key{i}", (), {}) for i in range(count)]


def test_concurrent_get_or_init_set_remove() -> None:
    store = ExtensionData("stress")
    init_keys = _key_types(16)
    churn_keys = _key_types(8)
    inits: Counter[type] = Counter()
    counter_lock = threading.Lock()
    barrier = threading.Barrier(24)
    errors: list[BaseException] = []

    def make_init(key: type) -> object:
        def init() -> object:
            with counter_lock:
                inits[key] += 1
            # Yield the GIL inside init: a get_or_init that checked and stored under two
            # separate lock holds would let the other threads run init for the same key here.
            time.sleep(0.002)
            return key()

        return init

    def initializer(offset: int) -> None:
        try:
            barrier.wait()
            for round_ in range(200):
                key = init_keys[(offset + round_) % len(init_keys)]
                value = store.get_or_init(key, make_init(key))  # type: ignore[arg-type]
                assert type(value) is key
                assert store.get(key) is value
        except BaseException as exc:
            errors.append(exc)

    def churner(offset: int) -> None:
        try:
            barrier.wait()
            for round_ in range(400):
                key = churn_keys[(offset + round_) % len(churn_keys)]
                store.set(key())
                got = store.get(key)
                assert got is None or type(got) is key
                store.remove(key)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=initializer, args=(i,)) for i in range(16)]
    threads += [threading.Thread(target=churner, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert inits == Counter({key: 1 for key in init_keys})
    for key in churn_keys:
        assert store.get(key) is None or type(store.get(key)) is key
