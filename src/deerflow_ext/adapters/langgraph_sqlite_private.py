"""The tables of LangGraph's ``SqliteSaver`` (``checkpoints`` and ``writes``), for a prune.

LangGraph's ``PostgresSaver`` prunes (``prune(thread_ids, strategy=...)``); its
``SqliteSaver`` does not (the base class raises ``NotImplementedError``). Thread TTL's
``keep_latest`` and ``threads.prune`` need it on SQLite too, so this module says it in the
saver's own SQL over the two tables its ``setup()`` creates: a thread's rows keyed by
``(thread_id, checkpoint_ns, checkpoint_id)``, the latest checkpoint of a namespace being the
greatest ``checkpoint_id`` (what ``get_tuple`` loads: ``ORDER BY checkpoint_id DESC``).

``keep_latest`` keeps that checkpoint of each namespace with its pending writes and deletes
every other checkpoint and write of the thread; the kept one's ``parent_checkpoint_id`` is
cleared, so its history is the one checkpoint (as the PostgreSQL saver leaves a kept
checkpoint whose parent it deleted). SQLite checkpoints hold their channel values whole, so
nothing else refers to a deleted row. ``tests/adapters`` checks the tables still have these
columns against the installed saver.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["PRUNE_STRATEGIES", "SQLITE_SAVER_COLUMNS", "prune_sqlite_saver"]

PRUNE_STRATEGIES = ("delete", "keep_latest")

SQLITE_SAVER_COLUMNS: dict[str, tuple[str, ...]] = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id"),
}
"""The columns the statements below name, per table (what the adapter test checks)."""

_LATEST = "SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? GROUP BY checkpoint_ns"


def prune_sqlite_saver(conn: sqlite3.Connection, thread_ids: Sequence[str], strategy: str) -> None:
    """Prune ``thread_ids`` in one transaction of ``conn`` (the saver's, under its lock)."""
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    with conn:  # one transaction: committed, or rolled back on an error
        for thread_id in map(str, thread_ids):
            if strategy == "delete":
                conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,))
                conn.execute("DELETE FROM writes WHERE thread_id = ?", (thread_id,))
                continue
            for namespace, latest in conn.execute(_LATEST, (thread_id,)).fetchall():
                kept = (thread_id, namespace, latest)
                conn.execute(
                    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id != ?", kept
                )
                conn.execute(
                    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id != ?", kept
                )
                conn.execute(
                    "UPDATE checkpoints SET parent_checkpoint_id = NULL "
                    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    kept,
                )
