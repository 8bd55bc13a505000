"""ClassMemo and ClassKeyMemo: one answer per class (and key), read from a plain dict, the same
object while the class lives."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

from deerflow_ext.memo import ClassKeyMemo, ClassMemo


def _classes(count: int) -> list[type]:
    return [type(f"C{n}", (), {}) for n in range(count)]


def test_each_class_is_computed_once_and_read_back_from_the_front() -> None:
    computed: list[tuple[type, object]] = []

    def compute(cls: type, extra: object = None) -> tuple[str, object]:
        computed.append((cls, extra))
        return (cls.__name__, extra)

    memo: ClassMemo[tuple[str, object]] = ClassMemo(compute)
    (a,) = _classes(1)
    missing = object()
    assert memo.get(a, missing) is missing
    answer = memo.load(a, "help")
    assert answer == ("C0", "help") and memo.get(a) is answer and memo(a) is answer
    assert memo.load(a, "other") is answer  # per class, whatever helps compute it
    assert computed == [(a, "help")]


def test_an_answer_keeps_its_identity_when_the_front_is_emptied() -> None:
    memo: ClassMemo[object] = ClassMemo(lambda cls: object(), limit=2)
    classes = _classes(5)
    first = [memo(cls) for cls in classes]
    assert len(memo._fast) <= 2  # bounded: the front was emptied along the way
    assert [memo(cls) for cls in classes] == first  # ...and refilled with the same answers


def test_a_dropped_class_is_forgotten() -> None:
    memo: ClassMemo[int] = ClassMemo(lambda cls: 1, limit=1)
    (dropped,) = _classes(1)
    memo(dropped)
    (kept,) = _classes(1)
    memo(kept)  # the front now holds only this one
    del dropped
    gc.collect()
    assert list(memo._store) == [kept]


def _raced(ask: Callable[[], object], threads: int = 8) -> list[object]:
    """What ``threads`` threads released at once each got from ``ask``."""
    answers: list[object] = []
    barrier = threading.Barrier(threads)

    def run() -> None:
        barrier.wait()
        answers.append(ask())

    started = [threading.Thread(target=run) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return answers


def test_threads_racing_on_a_new_class_get_one_answer() -> None:
    memo: ClassMemo[object] = ClassMemo(lambda cls: object())
    (cls,) = _classes(1)
    assert len({id(answer) for answer in _raced(lambda: memo(cls))}) == 1


def test_class_key_memo_answers_once_per_class_and_key() -> None:
    computed: list[tuple[type, str]] = []

    def compute(cls: type, key: str) -> str:
        computed.append((cls, key))
        return f"{cls.__name__}/{key}"

    memo: ClassKeyMemo[str, str] = ClassKeyMemo(compute)
    a, b = _classes(2)
    assert [memo(a, "x"), memo(a, "y"), memo(b, "x"), memo(a, "x")] == ["C0/x", "C0/y", "C1/x", "C0/x"]
    assert computed == [(a, "x"), (a, "y"), (b, "x")]


def test_class_key_memo_gives_racing_threads_one_answer_and_forgets_a_dropped_class() -> None:
    memo: ClassKeyMemo[str, object] = ClassKeyMemo(lambda cls, key: object(), limit=1)
    dropped = _classes(1)
    assert len({id(answer) for answer in _raced(lambda: memo(dropped[0], "k"))}) == 1
    (kept,) = _classes(1)
    memo(kept, "k")  # the front now holds only this one
    dropped.clear()
    gc.collect()
    assert list(memo._by_class._store) == [kept]
