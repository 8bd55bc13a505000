"""CPython's ``sqlite3`` module: loading a SQLite extension into a connection it opened.

The store's semantic search on SQLite runs ``sqlite-vec``'s functions, a loadable extension.
``sqlite3.Connection.enable_load_extension`` is the public way in, but it exists only when
Python was built with ``--enable-loadable-sqlite-extensions``; pyenv's and several
distributions' builds are not, although the SQLite library they link allows it. There the
extension is loaded through SQLite's own C API (``sqlite3_db_config`` with
``SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION``, which enables the C call only, never SQL's
``load_extension()``; then ``sqlite3_load_extension``), on the connection's ``sqlite3 *``
handle. That handle is the first field after the object header of CPython's
``pysqlite_Connection`` (``Modules/_sqlite/connection.h``, 3.11 to 3.13): a private layout.

The handle is checked before it is used: SQLite must name the same database file for it as
the connection does (``PRAGMA database_list``), and the library must be the one ``_sqlite3``
itself is linked to (an already-loaded ``libsqlite3.so.0`` is the same copy). Fallback: when
either check fails, :func:`load_extension` raises :class:`ExtensionLoadingUnavailable` with
the reason, and the caller says so in one line (semantic search on SQLite needs the extension).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sqlite3
import sys
from typing import Any

__all__ = ["ExtensionLoadingUnavailable", "load_extension"]

_ENABLE_LOAD_EXTENSION = 1005  # SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION
_HEADER = sys.getsizeof(object())  # PyObject_HEAD: where pysqlite_Connection.db sits


class ExtensionLoadingUnavailable(RuntimeError):
    """This Python cannot load a SQLite extension into its ``sqlite3`` connections."""


@functools.cache
def _library() -> Any:
    name = ctypes.util.find_library("sqlite3") or "libsqlite3.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise ExtensionLoadingUnavailable(f"the SQLite library {name!r} cannot be opened: {exc}") from None
    lib.sqlite3_db_filename.restype = ctypes.c_char_p
    lib.sqlite3_db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.sqlite3_db_config.restype = ctypes.c_int
    lib.sqlite3_db_config.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.sqlite3_load_extension.restype = ctypes.c_int
    lib.sqlite3_load_extension.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
    ]
    lib.sqlite3_libversion.restype = ctypes.c_char_p
    version = lib.sqlite3_libversion().decode()
    if version != sqlite3.sqlite_version:
        raise ExtensionLoadingUnavailable(f"{name} is SQLite {version}; Python's sqlite3 runs {sqlite3.sqlite_version}")
    return lib


def _handle(connection: sqlite3.Connection) -> int:
    """The connection's ``sqlite3 *``, checked against the file the connection names."""
    if type(connection) is not sqlite3.Connection or sys.implementation.name != "cpython":
        raise ExtensionLoadingUnavailable(f"not CPython's own sqlite3.Connection: {type(connection).__name__}")
    lib = _library()
    handle = ctypes.c_void_p.from_address(id(connection) + _HEADER).value
    if not handle:
        raise ExtensionLoadingUnavailable("the connection is closed")
    main = connection.execute("PRAGMA database_list").fetchone()
    expected = os.fsencode(main[2]) if main is not None and main[2] else b""
    found = lib.sqlite3_db_filename(handle, b"main") or b""
    if found != expected:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise ExtensionLoadingUnavailable(f"CPython {version}'s sqlite3.Connection layout is not the one expected")
    return int(handle)


def load_extension(connection: sqlite3.Connection, path: str) -> None:
    """Load the extension at ``path`` into ``connection`` (its default entry point)."""
    enable = getattr(connection, "enable_load_extension", None)
    if enable is not None:  # a Python built with loadable extensions: the public API
        enable(True)
        try:
            connection.load_extension(path)
        finally:
            enable(False)
        return
    lib = _library()
    handle = _handle(connection)
    if lib.sqlite3_db_config(handle, _ENABLE_LOAD_EXTENSION, 1, None) != 0:
        raise ExtensionLoadingUnavailable("SQLite refused to enable extension loading on this connection")
    try:
        error = ctypes.c_char_p()
        if lib.sqlite3_load_extension(handle, os.fsencode(path), None, ctypes.byref(error)) != 0:
            reason = error.value.decode(errors="replace") if error.value else "no reason given"
            raise ExtensionLoadingUnavailable(f"SQLite could not load {path}: {reason}")
    finally:
        lib.sqlite3_db_config(handle, _ENABLE_LOAD_EXTENSION, 0, None)
