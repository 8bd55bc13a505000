"""The LangGraph checkpointer, on the same database as the host tables.

One database means one backup and one place to look; on PostgreSQL it also means any
Gateway process can continue any thread. The savers manage their own connections (the
SQLite saver a sqlite3 connection on its own thread, ``sqlite_saver``; the Postgres saver a
psycopg one on its own thread for reads and an asyncpg one on the loop for writes,
``pg_saver``), so they are opened and closed with
the Gateway's lifespan alongside, not through, the SQLAlchemy engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from sqlalchemy.engine import URL

from .durability import Durability, sqlite_synchronous, with_libpq_options
from .engine import SQLITE_SYNCHRONOUS, normalize_database_url, sqlite_path
from .wal_checkpoints import WalCheckpoints

__all__ = ["SETUP_LOCK_KEY", "open_checkpointer", "psycopg_conninfo", "run_writes"]

SETUP_LOCK_KEY = 0x6465657266_636B70  # "deerf" "ckp"


def psycopg_conninfo(url: str | URL, durability: Durability | None = None) -> str:
    """A libpq URL (``postgresql://...``) for psycopg from any spelling of a Postgres URL,
    asking for ``durability`` (``durability``) on each connection: asyncpg reads it too."""
    parsed = with_libpq_options(normalize_database_url(url).set(drivername="postgresql"), durability)
    return parsed.render_as_string(hide_password=False)


def run_writes(checkpointer: Any) -> AbstractAsyncContextManager[None]:
    """The scope a run's graph runs in. PostgreSQL's saver acknowledges the run's writes as
    it queues them and has them all written by the scope's end (``pg_saver``: a write
    acknowledged per commit made each checkpoint wait a round trip for the one before);
    any other checkpointer writes as it always does, and the scope is empty."""
    behind = getattr(checkpointer, "writes_behind", None)
    return nullcontext() if behind is None else behind()


@asynccontextmanager
async def open_checkpointer(url: str | URL, durability: Durability | None = None) -> AsyncIterator[Any]:
    """Open, set up and finally close the saver that matches ``url``'s database, its
    connections at ``durability`` (``durability``; ``None``: each database's default)."""
    parsed = normalize_database_url(url)
    if parsed.get_backend_name() == "sqlite":
        from .sqlite_saver import open_sqlite_saver

        path = sqlite_path(parsed)
        if path is None:
            raise ValueError("the checkpointer needs a SQLite file, not an in-memory database")
        path.parent.mkdir(parents=True, exist_ok=True)
        # The file's WAL checkpoints too: the saver's and the store's commits leave them to it.
        with WalCheckpoints(str(path)):
            synchronous = sqlite_synchronous(durability) or SQLITE_SYNCHRONOUS
            async with open_sqlite_saver(str(path), pragmas=[f"synchronous={synchronous}"]) as saver:
                yield saver
        return
    from .pg_saver import open_postgres_saver

    async with open_postgres_saver(psycopg_conninfo(parsed, durability), lock_key=SETUP_LOCK_KEY) as saver:
        yield saver
