"""The SQLite checkpointer (``persistence/sqlite_saver.py``) against LangGraph's own savers.

The saver is LangGraph's ``SqliteSaver`` with each async call run whole, on the loop or one thread, so
the checks are: the same operations leave the same rows and read back the same tuples as
``AsyncSqliteSaver`` (what the Gateway used before), a graph's state and history read the
same, ``alist``'s paging returns what one query would, and several loops and threads can
use one saver at once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from deerflow_ext.persistence import threaded_saver
from deerflow_ext.persistence.sqlite_saver import OneThreadSqliteSaver, open_sqlite_saver
from deerflow_ext.persistence.threaded_saver import FIRST_PAGE, LAST_PAGE


@pytest.fixture
async def saver(tmp_path: Path) -> AsyncIterator[OneThreadSqliteSaver]:
    async with open_sqlite_saver(str(tmp_path / "new.db")) as opened:
        yield opened


@pytest.fixture
async def reference(tmp_path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "old.db")) as opened:
        await opened.setup()
        yield opened


def _checkpoint(n: int, value: Any, version: int | None = None) -> Any:
    checkpoint = empty_checkpoint()
    if version is not None:  # the base class's is 2; a graph's own loop writes 4
        checkpoint["v"] = version
    checkpoint["id"] = f"1f000000-0000-6000-8000-{n:012d}"
    checkpoint["ts"] = f"2026-12-01T00:00:{n % 60:02d}+00:00"
    checkpoint["channel_values"] = {"items": value}
    checkpoint["channel_versions"] = {"items": n}
    return checkpoint


async def _write_history(target: Any, thread_id: str, count: int, *, ns: str = "", version: int | None = None) -> None:
    """``count`` checkpoints in a chain, each with two writes (one of them an error), of
    checkpoint format ``version`` (by default ``empty_checkpoint``'s)."""
    parent: str | None = None
    for n in range(count):
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent
        checkpoint = _checkpoint(n, [n, "x" * n], version)
        saved = await target.aput(config, checkpoint, {"step": n, "source": "loop"}, {"items": n})
        await target.aput_writes(
            saved, [("items", {"n": n}), ("__error__", "boom")], task_id=f"task-{n}", task_path="~"
        )
        parent = saved["configurable"]["checkpoint_id"]


def _rows(path: Path) -> tuple[list[Any], list[Any]]:
    with sqlite3.connect(path) as conn:
        checkpoints = conn.execute(
            "SELECT * FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id"
        ).fetchall()
        writes = conn.execute(
            "SELECT * FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
        ).fetchall()
    return checkpoints, writes


def _plain(item: CheckpointTuple | None) -> Any:
    return (
        None if item is None else (item.config, item.checkpoint, item.metadata, item.parent_config, item.pending_writes)
    )


async def _alist(target: Any, config: Any, **kwargs: Any) -> list[Any]:
    return [_plain(item) async for item in target.alist(config, **kwargs)]


async def test_the_same_operations_leave_the_same_rows_as_langgraphs_async_saver(
    tmp_path: Path, saver: OneThreadSqliteSaver, reference: AsyncSqliteSaver
) -> None:
    for target in (saver, reference):
        await _write_history(target, "t-1", 5)
        await _write_history(target, "t-2", 3, ns="child:1")
        await _write_history(target, "gone", 2)
        await target.adelete_thread("gone")
    assert _rows(tmp_path / "new.db") == _rows(tmp_path / "old.db")
    assert _rows(tmp_path / "new.db")[0], "nothing was written"


async def test_reads_answer_as_langgraphs_async_saver_does(
    saver: OneThreadSqliteSaver, reference: AsyncSqliteSaver
) -> None:
    for target in (saver, reference):
        await _write_history(target, "t-1", 40)
        await _write_history(target, "t-2", 3, ns="child:1")
    latest = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
    at = {"configurable": {"thread_id": "t-1", "checkpoint_ns": "", "checkpoint_id": _checkpoint(7, None)["id"]}}
    before = {"configurable": {"checkpoint_id": _checkpoint(30, None)["id"]}}
    for config in (latest, at, {"configurable": {"thread_id": "nobody", "checkpoint_ns": ""}}):
        assert _plain(await saver.aget_tuple(config)) == _plain(await reference.aget_tuple(config))
    queries: list[tuple[Any, dict[str, Any]]] = [
        (latest, {}),
        (latest, {"limit": 3}),
        (latest, {"limit": FIRST_PAGE + 1}),
        (latest, {"before": before}),
        (latest, {"before": before, "limit": 20}),
        (latest, {"filter": {"source": "loop"}, "limit": 25}),
        (latest, {"filter": {"step": 3}}),
        (at, {}),
        ({"configurable": {"thread_id": "t-2"}}, {}),  # every namespace: read whole, not paged
        (None, {}),
        (None, {"limit": 5}),
    ]
    for config, kwargs in queries:
        assert await _alist(saver, config, **kwargs) == await _alist(reference, config, **kwargs), (config, kwargs)
    assert len(await _alist(saver, latest)) == 40


async def test_an_unbounded_list_reads_pages_and_a_reader_that_stops_pays_for_one(
    saver: OneThreadSqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = FIRST_PAGE + 2 * FIRST_PAGE + 4 * FIRST_PAGE + 5
    await _write_history(saver, "t-1", total)
    pages: list[int | None] = []
    page = threaded_saver._read_page

    def counted(target: Any, config: Any, filter: Any, before: Any, limit: int | None) -> list[CheckpointTuple]:
        pages.append(limit)
        return page(target, config, filter, before, limit)

    monkeypatch.setattr(threaded_saver, "_read_page", counted)
    config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
    async for _ in saver.alist(config):
        break
    assert pages == [FIRST_PAGE]
    pages.clear()
    ids = [item.config["configurable"]["checkpoint_id"] async for item in saver.alist(config)]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == total
    assert pages == [FIRST_PAGE, 2 * FIRST_PAGE, 4 * FIRST_PAGE, 8 * FIRST_PAGE]
    pages.clear()
    assert len([item async for item in saver.alist(config, limit=LAST_PAGE + 1)]) == total
    assert pages == [LAST_PAGE]


class _State(TypedDict):
    items: Annotated[list[str], lambda left, right: left + right]


def _graph(checkpointer: Any) -> Any:
    builder = StateGraph(_State)
    builder.add_node("first", lambda state: {"items": ["first"]})
    builder.add_node("second", lambda state: {"items": ["second"]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=checkpointer, interrupt_before=["second"])


def _snapshot(snapshot: Any) -> Any:
    metadata = {k: v for k, v in (snapshot.metadata or {}).items() if k != "run_id"}
    return (snapshot.values, snapshot.next, metadata, [(t.name, t.interrupts) for t in snapshot.tasks])


async def test_a_graphs_state_and_history_read_as_with_langgraphs_async_saver(
    saver: OneThreadSqliteSaver, reference: AsyncSqliteSaver
) -> None:
    seen = []
    for target in (saver, reference):
        graph = _graph(target)
        config = {"configurable": {"thread_id": "t-1"}}
        await graph.ainvoke({"items": ["in"]}, config)  # stops before "second": pending task
        paused = _snapshot(await graph.aget_state(config))
        await graph.aupdate_state(config, {"items": ["edited"]})
        await graph.ainvoke(None, config)
        history = [_snapshot(s) async for s in graph.aget_state_history(config)]
        seen.append((paused, _snapshot(await graph.aget_state(config)), history))
    assert seen[0] == seen[1]
    assert seen[0][1][0] == {"items": ["in", "first", "edited", "second"]}


async def _alongside(target: Callable[[str], None], names: list[str], here: Awaitable[None]) -> None:
    """``target(name)`` on a thread per name while this loop awaits ``here``."""
    threads = [threading.Thread(target=target, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    try:
        await here
    finally:
        for thread in threads:
            thread.join()


async def test_async_calls_from_several_loops_run_where_awaited_or_on_the_savers_thread_one_at_a_time(
    saver: OneThreadSqliteSaver,
) -> None:
    ran_on: set[int] = set()
    inside, most = [0], [0]
    guard = threading.Lock()
    put = saver.put

    def spied_put(*args: Any) -> Any:
        with guard:
            ran_on.add(threading.get_ident())
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            return put(*args)
        finally:
            with guard:
                inside[0] -= 1

    saver.put = spied_put  # type: ignore[method-assign]
    loops: set[int] = {threading.get_ident()}

    def other_loop(thread_id: str) -> None:
        loops.add(threading.get_ident())
        asyncio.run(_write_history(saver, thread_id, 20))

    await _alongside(other_loop, ["loop-0", "loop-1"], _write_history(saver, "main-loop", 20))
    assert ran_on & loops and ran_on <= loops | {saver.thread.ident}  # the first put finds nothing handed over
    assert most[0] == 1  # the saver's lock, and the thread's turn, keep them one at a time
    for thread_id in ("main-loop", "loop-0", "loop-1"):
        assert len(await _alist(saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})) == 20


async def test_synchronous_calls_from_other_threads_share_the_connection_safely(saver: OneThreadSqliteSaver) -> None:
    def sync_writer(thread_id: str) -> None:
        parent = None
        for n in range(20):
            config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            if parent:
                config["configurable"]["checkpoint_id"] = parent
            saved = saver.put(config, _checkpoint(n, [n]), {"step": n}, {"items": n})
            saver.put_writes(saved, [("items", n)], task_id="t")
            parent = saved["configurable"]["checkpoint_id"]

    await _alongside(sync_writer, ["sync-0", "sync-1"], _write_history(saver, "async", 20))
    for thread_id in ("sync-0", "sync-1", "async"):
        items = await _alist(saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        assert len(items) == 20 and all(item[4] for item in items)  # each with its pending write


async def test_a_failing_call_raises_in_its_caller_and_the_saver_goes_on(saver: OneThreadSqliteSaver) -> None:
    with pytest.raises(KeyError):
        await saver.aput({"configurable": {}}, _checkpoint(0, []), {}, {})
    await _write_history(saver, "t-1", 2)
    assert await saver.aget_tuple({"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}) is not None


async def test_opening_applies_the_pragmas_and_sets_the_tables_up(tmp_path: Path) -> None:
    async with open_sqlite_saver(str(tmp_path / "x.db"), pragmas=["synchronous=NORMAL"]) as opened:
        synchronous = await opened.thread.run(lambda: opened.conn.execute("PRAGMA synchronous").fetchone()[0])
        journal = await opened.thread.run(lambda: opened.conn.execute("PRAGMA journal_mode").fetchone()[0])
        assert (synchronous, journal) == (1, "wal")
        assert opened.is_setup
    with sqlite3.connect(tmp_path / "x.db") as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"checkpoints", "writes"} <= tables
    with pytest.raises(RuntimeError, match="closed"):
        await opened.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})


def test_every_async_method_langgraphs_async_saver_has_is_ours_too() -> None:
    """A LangGraph upgrade that gives ``AsyncSqliteSaver`` a new async method would leave
    ours answering with ``SqliteSaver``'s or the base class's ``NotImplementedError``."""
    import inspect

    theirs = {
        name
        for name, member in vars(AsyncSqliteSaver).items()
        if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
    }
    theirs.discard("setup")  # async there; ours is SqliteSaver's, plus asetup on the thread
    ours = {
        name
        for name in theirs
        if getattr(OneThreadSqliteSaver, name).__qualname__.startswith(("OneThreadSqliteSaver.", "OnThreads."))
    }
    assert theirs - ours == set(), (
        f"langgraph-checkpoint-sqlite's AsyncSqliteSaver has async methods we lack: {theirs - ours}"
    )
    assert "asetup" in vars(OneThreadSqliteSaver)
