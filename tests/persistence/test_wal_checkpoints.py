"""SQLite's WAL checkpoints on their own thread (``persistence/wal_checkpoints.py``).

A checkpoint copies the log's pages into the database file, so the file's size says whether
one happened: the writer here never checkpoints by itself (``wal_autocheckpoint=0``), and its
pages reach the file only through :class:`WalCheckpoints`.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow_ext.persistence import open_checkpointer
from deerflow_ext.persistence.sqlite_saver import open_sqlite_saver
from deerflow_ext.persistence.wal_checkpoints import LOOP_CHECKPOINT_PAGES, WalCheckpoints

PAGES = 200


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "wal.db")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (body BLOB)")
    conn.commit()
    yield conn
    conn.close()


def _write_pages(conn: sqlite3.Connection) -> None:
    conn.executemany("INSERT INTO t VALUES (?)", [(b"x" * 4000,) for _ in range(PAGES)])
    conn.commit()


def _file_pages(path: Path) -> int:
    return path.stat().st_size // 4096


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "deerflow-wal-checkpoints"]


def test_the_thread_copies_committed_pages_into_the_file(tmp_path: Path, writer: sqlite3.Connection) -> None:
    path = tmp_path / "wal.db"
    with WalCheckpoints(str(path), every=0.01):
        _write_pages(writer)
        assert _file_pages(path) < PAGES  # in the log only
        deadline = time.monotonic() + 10
        while _file_pages(path) < PAGES and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _file_pages(path) >= PAGES
        assert writer.execute("SELECT count(*) FROM t").fetchone() == (PAGES,)


def test_exit_stops_the_thread_after_a_last_checkpoint(tmp_path: Path, writer: sqlite3.Connection) -> None:
    path = tmp_path / "wal.db"
    with WalCheckpoints(str(path), every=3600):  # no periodic checkpoint in this test's time
        _write_pages(writer)
        assert len(_checkpoint_threads()) == 1
    assert _checkpoint_threads() == []
    assert _file_pages(path) >= PAGES


def test_a_database_it_cannot_open_is_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "no-such-folder" / "wal.db"
    with caplog.at_level(logging.WARNING, logger="deerflow_ext.persistence.wal_checkpoints"):
        with WalCheckpoints(str(missing), every=0.01):
            time.sleep(0.05)
    assert len(caplog.records) == 1
    assert str(missing) in caplog.records[0].getMessage()
    assert "cannot open" in caplog.records[0].getMessage()


async def test_the_sqlite_checkpointer_runs_them_for_its_file(tmp_path: Path) -> None:
    async with open_checkpointer(f"sqlite:///{tmp_path / 'gw.db'}"):
        assert len(_checkpoint_threads()) == 1
    assert _checkpoint_threads() == []


async def test_the_saver_s_connection_checkpoints_only_past_the_bound(tmp_path: Path) -> None:
    async with open_sqlite_saver(str(tmp_path / "gw.db")) as saver:
        assert saver.conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (LOOP_CHECKPOINT_PAGES,)
