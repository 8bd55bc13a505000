"""``adapters.cpython_sqlite``: a SQLite extension (sqlite-vec) loaded into CPython's own
``sqlite3`` connections. Fails loudly, naming the Python, when the private handle layout
stops matching, which would switch semantic search on SQLite off with one error line."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
import sqlite_vec

from deerflow_ext.adapters import cpython_sqlite

WHERE = f"CPython {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}"


def test_sqlite_vec_loads_into_a_file_connection_and_answers(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "x.db")
    try:
        cpython_sqlite.load_extension(connection, sqlite_vec.loadable_path())
    except cpython_sqlite.ExtensionLoadingUnavailable as exc:
        pytest.fail(f"{WHERE}: sqlite-vec cannot be loaded: {exc}")
    a, b = sqlite_vec.serialize_float32([1.0, 0.0]), sqlite_vec.serialize_float32([0.6, 0.8])
    (distance,) = connection.execute("SELECT vec_distance_cosine(?, ?)", (a, b)).fetchone()
    assert distance == pytest.approx(0.4, abs=1e-6), WHERE
    # Only the C call was enabled, and only for the load: SQL's load_extension() stays refused.
    with pytest.raises(sqlite3.OperationalError):
        connection.execute("SELECT load_extension(?)", (sqlite_vec.loadable_path(),))
    connection.close()


def test_a_missing_extension_and_a_foreign_connection_are_one_clear_error(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "y.db")
    with pytest.raises(
        (cpython_sqlite.ExtensionLoadingUnavailable, sqlite3.OperationalError), match="no-such-extension"
    ):
        cpython_sqlite.load_extension(connection, str(tmp_path / "no-such-extension.so"))
    connection.close()

    class Wrapped(sqlite3.Connection):
        pass

    wrapped = sqlite3.connect(tmp_path / "z.db", factory=Wrapped)
    if hasattr(wrapped, "enable_load_extension"):
        pytest.skip("this Python loads extensions through the public API; no handle is read")
    with pytest.raises(cpython_sqlite.ExtensionLoadingUnavailable, match=r"not CPython's own sqlite3\.Connection"):
        cpython_sqlite.load_extension(wrapped, sqlite_vec.loadable_path())
    wrapped.close()
