"""``sqlite-vec``'s SQL functions (``vec_distance_cosine``...) on a host SQLite connection.

Loaded on first use per connection (a semantic search), not at connect: a Gateway with no
``store.index`` never loads it, and a connection opened before the index was configured gets
it when first asked. Whether a connection has it is kept in the pool record's ``info`` (its
life is the DBAPI connection's), so the check is a dictionary lookup per search.
"""

from __future__ import annotations

import sqlite_vec
from sqlalchemy import Connection

from deerflow_ext.adapters.cpython_sqlite import ExtensionLoadingUnavailable, load_extension

__all__ = ["ensure_sqlite_vec"]

_LOADED = "deerflow_sqlite_vec"


def ensure_sqlite_vec(conn: Connection) -> None:
    """Load ``sqlite-vec`` into ``conn``'s SQLite connection unless it is there already;
    ``RuntimeError`` naming why when this Python cannot load it."""
    record = conn.connection
    if record.info.get(_LOADED):
        return
    try:
        load_extension(record.dbapi_connection, sqlite_vec.loadable_path())  # type: ignore[arg-type]
    except (ExtensionLoadingUnavailable, OSError) as exc:
        raise RuntimeError(
            f"semantic search on SQLite needs the sqlite-vec extension, which cannot load: {exc}"
        ) from None
    record.info[_LOADED] = True
