"""ClassMemo: one answer per class, read from a plain dict, the same object while the class lives."""

from __future__ import annotations

import gc
import threading

from deerflow_ext.extensions.memo import ClassMemo


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


def test_threads_racing_on_a_new_class_get_one_answer() -> None:
    memo: ClassMemo[object] = ClassMemo(lambda cls: object())
    (cls,) = _classes(1)
    answers: list[object] = []
    barrier = threading.Barrier(8)

    def ask() -> None:
        barrier.wait()
        answers.append(memo(cls))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(answer) for answer in answers}) == 1
