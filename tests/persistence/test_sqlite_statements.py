"""The store's SQLite statements sent on the DBAPI connection (``sqlite_statements``): the
same rows, errors and reads as through SQLAlchemy's ``Connection.execute``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, bindparam, create_engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from deerflow_ext.persistence import sqlite_statements
from deerflow_ext.persistence.compiled import compile_for
from deerflow_ext.persistence.models import Base, RunRow, ThreadRow

_THREADS = ThreadRow.__table__
_INSERT_THREAD = insert(_THREADS)
_RENAME = update(_THREADS).where(_THREADS.c.id == bindparam("thread_id"))
_METADATA = select(_THREADS.c.metadata, _THREADS.c.created_at).where(_THREADS.c.status == bindparam("wanted"))
_WHEN = datetime(2026, 12, 5, 1, 2, 3, 456789, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite+pysqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


def _thread(thread_id: str, metadata: object) -> dict[str, object]:
    return {
        "id": thread_id, "title": None, "status": "idle", "created_at": _WHEN, "updated_at": _WHEN,
        "metadata": metadata,
    }  # fmt: skip


def _stored(engine: Engine) -> list[tuple[object, ...]]:
    """The rows as the file holds them (pysqlite's own text, no SQLAlchemy types)."""
    with engine.connect() as conn:
        return [tuple(row) for row in conn.exec_driver_sql("SELECT * FROM threads ORDER BY id")]


@pytest.mark.parametrize("metadata", [{"graph": "lead", "n": [1, 2]}, {}, None])
def test_a_row_is_stored_as_sqlalchemy_stores_it(engine: Engine, metadata: object) -> None:
    with engine.begin() as conn:
        conn.execute(_INSERT_THREAD, _thread("by-sqlalchemy", metadata))
        assert sqlite_statements.execute(conn, _INSERT_THREAD, _thread("sent", metadata)) == 1
    via_sqlalchemy, sent = _stored(engine)
    assert sent[1:] == via_sqlalchemy[1:]  # the datetimes' and JSON's text alike
    with engine.connect() as conn:
        back = conn.execute(select(_THREADS).where(_THREADS.c.id == "sent")).one()
    assert back.created_at.replace(tzinfo=UTC) == _WHEN
    assert back.metadata == metadata


def test_an_update_says_how_many_rows_it_changed(engine: Engine) -> None:
    with engine.begin() as conn:
        sqlite_statements.execute(conn, _INSERT_THREAD, _thread("t", {}))
        assert sqlite_statements.execute(conn, _RENAME, {"thread_id": "t", "title": "named"}) == 1
        assert sqlite_statements.execute(conn, _RENAME, {"thread_id": "none", "title": "named"}) == 0
    with engine.connect() as conn:
        assert conn.scalar(select(_THREADS.c.title)) == "named"


def test_a_driver_error_is_raised_as_sqlalchemy_raises_it_and_rolls_back(engine: Engine) -> None:
    with pytest.raises(IntegrityError) as raised, engine.begin() as conn:
        sqlite_statements.execute(conn, _INSERT_THREAD, _thread("t", {}))
        sqlite_statements.execute(conn, _INSERT_THREAD, _thread("t", {}))
    assert isinstance(raised.value.orig, sqlite3.IntegrityError)
    assert _stored(engine) == []  # the transaction's first insert went with it


def test_a_read_parses_its_columns_and_leaves_no_snapshot_open(engine: Engine, tmp_path: Path) -> None:
    with engine.begin() as conn:
        for name in ("a", "b"):
            sqlite_statements.execute(conn, _INSERT_THREAD, _thread(name, {"name": name}))
    with engine.connect() as conn:
        found = sqlite_statements.first(conn, _METADATA, {"wanted": "idle"})
        assert found is not None
        assert found[0] in ({"name": "a"}, {"name": "b"})
        assert found[1].replace(tzinfo=UTC) == _WHEN
        assert sqlite_statements.first(conn, _METADATA, {"wanted": "busy"}) is None
        # The select matched two rows and one was read: a statement still open on the
        # connection would keep its read snapshot, and a checkpoint could not finish.
        other = sqlite3.connect(tmp_path / "store.db")
        try:
            busy, _log, _done = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            other.close()
        assert busy == 0


def test_a_column_with_a_python_default_must_be_given() -> None:
    dialect = create_engine("sqlite://").dialect
    given = frozenset({"id", "thread_id", "status", "input"})
    with pytest.raises(ValueError, match="created_at"):
        compile_for(dialect, insert(RunRow.__table__), given, processed=True)
