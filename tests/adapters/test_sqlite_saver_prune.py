"""The SQLite saver's tables as ``adapters.langgraph_sqlite_private`` prunes them, checked
against the installed ``langgraph-checkpoint-sqlite``: its columns, and a prune that leaves
what LangGraph's own reads then see (``list``: one checkpoint per namespace, no parent)."""

from __future__ import annotations

import sqlite3
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from deerflow_ext.adapters.langgraph_sqlite_private import SQLITE_SAVER_COLUMNS, prune_sqlite_saver

VERSION = f"langgraph-checkpoint-sqlite {metadata.version('langgraph-checkpoint-sqlite')}"


def _saver(path: Path) -> SqliteSaver:
    saver = SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))
    saver.setup()
    return saver


def _history(saver: SqliteSaver, thread_id: str, namespace: str = "") -> list[Any]:
    return list(saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}))


def _fill(saver: SqliteSaver, thread_id: str, namespace: str = "", count: int = 3) -> list[str]:
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
    ids = []
    for step in range(count):
        checkpoint = empty_checkpoint()
        config = saver.put(config, checkpoint, {"step": step}, {})
        saver.put_writes(config, [("channel", step)], task_id=f"task-{step}")
        ids.append(checkpoint["id"])
    return ids


def test_the_saver_tables_have_the_columns_the_prune_names(tmp_path: Path) -> None:
    saver = _saver(tmp_path / "c.db")
    for table, columns in SQLITE_SAVER_COLUMNS.items():
        found = {row[1] for row in saver.conn.execute(f"PRAGMA table_info({table})")}
        missing = set(columns) - found
        assert not missing, f"{VERSION}: table {table} lost {sorted(missing)}: SQLite thread prune must change"


def test_keep_latest_keeps_each_namespaces_newest_checkpoint_and_its_writes_only(tmp_path: Path) -> None:
    saver = _saver(tmp_path / "c.db")
    ids = _fill(saver, "t1")
    sub = _fill(saver, "t1", namespace="sub", count=2)
    other = _fill(saver, "t2")
    prune_sqlite_saver(saver.conn, ["t1"], "keep_latest")
    kept = _history(saver, "t1")
    assert [c.config["configurable"]["checkpoint_id"] for c in kept] == [ids[-1]], VERSION
    assert kept[0].parent_config is None and [w[1:] for w in kept[0].pending_writes or []] == [("channel", 2)]
    assert [c.config["configurable"]["checkpoint_id"] for c in _history(saver, "t1", "sub")] == [sub[-1]]
    assert len(_history(saver, "t2")) == len(other)  # another thread is untouched
    latest = saver.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == ids[-1]

    prune_sqlite_saver(saver.conn, ["t1", "t2"], "delete")
    assert _history(saver, "t1") == [] and _history(saver, "t2") == [] and _history(saver, "t1", "sub") == []
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone() == (0,)


def test_a_bad_call_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    saver = _saver(tmp_path / "c.db")
    _fill(saver, "t1")
    with pytest.raises(TypeError):
        prune_sqlite_saver(saver.conn, "t1", "delete")
    with pytest.raises(ValueError, match="strategy"):
        prune_sqlite_saver(saver.conn, ["t1"], "shrink")
    assert len(_history(saver, "t1")) == 3
