"""How long a commit waits for the disk: one setting for every connection the host opens.

Why a setting: what a commit costs is mostly the wait for the disk, and how much a crash may
lose in exchange is the operator's call, not ours. ``DEERFLOW_DATABASE_DURABILITY`` chooses,
and every connection of the host to its database (the engine's, SQLite's synchronous
twin's, the loop statements', the checkpointer's) is opened with it, so one process never mixes two:

- ``full``: SQLite ``synchronous=FULL`` (the write-ahead log is synced at every commit),
  PostgreSQL ``synchronous_commit=on`` (a commit returns once its WAL is flushed). A crash
  of the process, the operating system or the power loses no committed transaction.
- ``relaxed``: SQLite ``synchronous=NORMAL`` (the log is synced at checkpoints): a crash of
  the process loses nothing, a crash of the operating system or a power cut the last
  commits; PostgreSQL ``synchronous_commit=off`` (the WAL writer flushes within about three
  ``wal_writer_delay``, 600 ms by default): a crash of the Gateway loses nothing, a crash
  of the PostgreSQL server or of its machine the commits of that last fraction of a second.
  Neither ever corrupts the database: a transaction is there whole or not at all.
- unset (``None``): each database as before the setting existed: SQLite ``NORMAL`` (the
  host's choice since it measured ``FULL``'s fsync per commit as its bottleneck,
  ``engine.SQLITE_SYNCHRONOUS``), PostgreSQL whatever the server or role configures (``on``
  unless told otherwise).

The two settings of a pair are the same promise on both databases, which is what a
comparison of their speed must hold equal (``benchmarks/durability_pairs.py``).

On PostgreSQL the setting is sent in each connection's startup packet (asyncpg's
``server_settings``, libpq's ``options``), so it costs no round trip. An engine made with a
durability carries it as an execution option (:data:`DURABILITY_OPTION`), where what is
derived from the engine later (``transactions``, ``loop_statements``) reads it.
"""

from __future__ import annotations

from typing import Literal, get_args

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "DURABILITIES",
    "DURABILITY_OPTION",
    "Durability",
    "durability_of",
    "engine_options",
    "libpq_options",
    "postgres_server_settings",
    "postgres_synchronous_commit",
    "sqlite_synchronous",
    "with_libpq_options",
]

Durability = Literal["full", "relaxed"]
DURABILITIES: tuple[Durability, ...] = get_args(Durability)
DURABILITY_OPTION = "deerflow_durability"
"""The engine execution option that carries the durability the engine was made with."""

_SQLITE: dict[str, str] = {"full": "FULL", "relaxed": "NORMAL"}
_POSTGRES: dict[str, str] = {"full": "on", "relaxed": "off"}


def _known(durability: str) -> Durability:
    if durability not in DURABILITIES:
        raise ValueError(f"database durability {durability!r}: use one of {', '.join(DURABILITIES)}")
    return durability


def sqlite_synchronous(durability: Durability | None) -> str | None:
    """SQLite's ``synchronous`` level for ``durability``; ``None`` when unset (the caller's default)."""
    return None if durability is None else _SQLITE[_known(durability)]


def postgres_synchronous_commit(durability: Durability | None) -> str | None:
    """PostgreSQL's ``synchronous_commit`` for ``durability``; ``None`` when unset (the server's)."""
    return None if durability is None else _POSTGRES[_known(durability)]


def postgres_server_settings(durability: Durability | None) -> dict[str, str]:
    """asyncpg's ``server_settings`` for ``durability`` (empty when unset)."""
    value = postgres_synchronous_commit(durability)
    return {} if value is None else {"synchronous_commit": value}


def libpq_options(durability: Durability | None) -> dict[str, str]:
    """libpq's ``options`` connection parameter for ``durability`` (empty when unset).

    ``-cname=value`` with no space: in a URL libpq decodes ``%20`` but not ``+``, and
    SQLAlchemy renders a space as ``+``; asyncpg, handed the same URL, sends ``options`` in
    its startup packet as libpq does."""
    value = postgres_synchronous_commit(durability)
    return {} if value is None else {"options": f"-csynchronous_commit={value}"}


def with_libpq_options(url: URL, durability: Durability | None) -> URL:
    """``url`` (a PostgreSQL URL) asking every connection made from it for ``durability``."""
    options = libpq_options(durability)
    return url.update_query_dict(options) if options else url


def engine_options(durability: Durability | None) -> dict[str, str]:
    """The execution options that make an engine carry ``durability`` (:func:`durability_of`)."""
    return {} if durability is None else {DURABILITY_OPTION: _known(durability)}


def durability_of(engine: AsyncEngine) -> Durability | None:
    """The durability ``engine`` was made with (``engine.create_engine``); ``None`` when unset."""
    value = engine.get_execution_options().get(DURABILITY_OPTION)
    return None if value is None else _known(value)
