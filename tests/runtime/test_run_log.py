"""RunLog against a plain list: whatever was sealed and trimmed, a read answers exactly the
events a list of everything published would, from the oldest retained one on."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from deerflow_ext.runtime.run_log import BLOCK, LIVE, RunLog


def _data(i: int) -> str:
    # What a token event looks like: a small change inside much that repeats.
    return json.dumps([{"content": f"tok{i}", "type": "AIMessageChunk"}, {"langgraph_node": "model", "x": "y" * 40}])


@settings(max_examples=150, deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=5 * BLOCK),
    published=st.integers(min_value=0, max_value=8 * BLOCK),
    reads=st.lists(st.tuples(st.integers(min_value=0, max_value=10 * BLOCK), st.integers(1, 3 * BLOCK)), max_size=8),
    ended=st.booleans(),
)
def test_reads_match_a_list_of_every_event(
    limit: int, published: int, reads: list[tuple[int, int]], ended: bool
) -> None:
    log = RunLog(limit)
    everything = [(f"e{i % 3}", _data(i)) for i in range(1, published + 1)]
    for event, data in everything:
        log.append(event, data)
    if ended:
        log.end()
    retained = log.next_seq - log.first_seq
    assert log.next_seq == published + 1
    assert min(published, limit) <= retained <= max(limit + max(limit // 4, 1) + BLOCK, limit)
    for position, count in reads:
        position = max(position, log.first_seq - 1)
        got = [(int(e.id), e.event, e.data) for e in log.since(position, count)]
        want = [(i, *everything[i - 1]) for i in range(position + 1, min(position + count, published) + 1)]
        assert got == want


def test_a_long_reply_is_kept_compressed_but_the_newest_events_as_they_are() -> None:
    log = RunLog(10_000)
    for i in range(200):
        log.append("messages", _data(i))
    raw = sum(len(_data(i)) for i in range(200))
    assert LIVE <= len(log._tail) < LIVE + BLOCK
    kept = sum(len(b) for b in log._blocks) + sum(len(e.data) for e in log._tail)
    assert kept < raw / 3
    assert [e.id for e in log.since(199 - 5, 10)] == ["195", "196", "197", "198", "199", "200"]


def test_an_ended_stream_keeps_nothing_as_it_is() -> None:
    log = RunLog(10_000)
    for i in range(200):
        log.append("messages", _data(i))
    log.append("end", "{}")
    log.end()
    assert log._tail == []
    raw = sum(len(_data(i)) for i in range(200))
    assert sum(len(b) for b in log._blocks) < raw / 10
    assert [(e.id, e.event) for e in log.since(198, 5)] == [("199", "messages"), ("200", "messages"), ("201", "end")]
    assert [e.data for e in log.since(0, 300)] == [*(_data(i) for i in range(200)), "{}"]


def _actual_size(log: RunLog) -> int:
    return sum(len(b) for b in log._blocks) + sum(len(e.data) for e in log._tail)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=3000), max_size=6 * BLOCK),
    max_bytes=st.integers(min_value=1, max_value=20_000),
    ended=st.booleans(),
    position=st.integers(min_value=0, max_value=8 * BLOCK),
)
def test_a_byte_budget_drops_the_oldest_events_and_keeps_the_newest(
    sizes: list[int], max_bytes: int, ended: bool, position: int
) -> None:
    """Over ``max_bytes`` the oldest events go (whole sealed blocks, then tail events), never
    the newest; what is kept reads back exactly, and ``size`` is what the log holds."""
    log = RunLog(10_000, max_bytes)
    everything = [("e", json.dumps("x" * n)) for n in sizes]
    for event, data in everything:
        log.append(event, data)
    if ended:
        log.append("end", "{}")
        log.end()
        log.trim(max_bytes)
        everything.append(("end", "{}"))
    assert log.size == _actual_size(log)
    retained = log.next_seq - log.first_seq
    assert retained >= min(len(everything), 1)
    assert log.size <= max_bytes or retained == 1  # over it only by the newest event
    position = max(position, log.first_seq - 1)
    got = [(int(e.id), e.event, e.data) for e in log.since(position, 10 * BLOCK, 10**9)]
    want = [(i, *everything[i - 1]) for i in range(position + 1, len(everything) + 1)]
    assert got == want


def test_reads_are_cut_by_size_and_large_events_are_shared() -> None:
    log = RunLog(10_000)
    big = json.dumps("m" * 300_000)
    for _ in range(3 * BLOCK):
        log.append("values", big)
    assert len(log.since(log.next_seq - 3, 256)) == 1  # the tail: one 300 KB event passes 64 KiB
    log.append("end", "{}")
    log.end()
    first = log.since(0, 256)
    assert len(first) == BLOCK  # sealed: the cut falls in the first block, which is read whole
    again = log.since(0, 256)
    assert all(a is b for a, b in zip(first, again, strict=True))  # one copy between two readers
    assert [e.id for e in log.since(BLOCK, 256)] == [str(BLOCK + i) for i in range(1, BLOCK + 1)]
    small = RunLog(10_000)
    for i in range(100):
        small.append("messages", _data(i))
    batch = small.since(small.next_seq - 1 - LIVE, 256, 300)  # from the tail
    assert 1 < len(batch) < LIVE
    assert sum(len(e.data) for e in batch[:-1]) < 300 <= sum(len(e.data) for e in batch)
