"""SQLite's WAL checkpoints made on a thread of their own, so the event loop's commits seldom
pay for one.

In WAL mode a commit appends pages to the log. The commit that takes the log past SQLite's
automatic checkpoint (1,000 pages) copies the log back into the database file (a
*checkpoint*) and syncs both before it returns; the next commit then starts the log over and
syncs its header. The store's and the checkpointer's SQLite connections commit on the event
loop (``one_thread``), so every run of the process stalled for the copy and the syncs
(10-20 ms each on the issue's VMs, 0.6-2.7% of the loop's samples at 32 clients).

So those connections checkpoint only past :data:`LOOP_CHECKPOINT_PAGES`
(:func:`checkpoint_rarely`), and :class:`WalCheckpoints` makes a ``PASSIVE`` checkpoint every
:data:`CHECKPOINT_SECONDS` on a connection of its own. ``PASSIVE`` copies what it can
without waiting for any reader or writer, and sqlite3 lets go of the GIL while it copies and
syncs, so the loop goes on meanwhile. What is left on the loop is the sync of the log's
header when a commit starts it over, once after each of the thread's checkpoints. Durability
does not change: a committed transaction is in the log whether or not it has been copied.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from types import TracebackType

__all__ = ["CHECKPOINT_SECONDS", "LOOP_CHECKPOINT_PAGES", "WalCheckpoints", "checkpoint_rarely"]

log = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 1.0
"""How often the thread checkpoints. Each checkpoint costs the loop one header sync, when the
log starts over: every 50 ms those syncs were 2% of the loop's samples at 32 clients, once a
second 0.1%, with no checkpoint left on the loop (py-spy ``--native``). At that load
a second of commits is ~4,000 pages, under a loop connection's bound."""

LOOP_CHECKPOINT_PAGES = 10_000
"""A loop connection's own automatic checkpoint, against SQLite's 1,000 pages: ~40 MB of log."""


def checkpoint_rarely(dbapi_connection: sqlite3.Connection, _record: object = None) -> None:
    """On a connection whose commits are made on the event loop: checkpoint only past
    :data:`LOOP_CHECKPOINT_PAGES` (also an engine's ``connect`` listener)."""
    dbapi_connection.execute(f"PRAGMA wal_autocheckpoint={LOOP_CHECKPOINT_PAGES}")


class WalCheckpoints:
    """A daemon thread making a ``PASSIVE`` checkpoint of ``path`` every ``every`` seconds.

    A context manager: the thread starts on entry; on exit it stops, after one last
    checkpoint. A checkpoint that fails (a full disk, say) is logged in one line and tried
    again next time; the loop connections' automatic checkpoints go on meanwhile.
    """

    def __init__(self, path: str, *, every: float = CHECKPOINT_SECONDS) -> None:
        self._path = path
        self._every = every
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._serve, name="deerflow-wal-checkpoints", daemon=True)

    def __enter__(self) -> WalCheckpoints:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _serve(self) -> None:
        try:
            conn = sqlite3.connect(self._path, check_same_thread=False)
        except sqlite3.Error as error:
            log.warning("WAL checkpoints of %s: cannot open the database (%s); commits make them", self._path, error)
            return
        try:
            while not self._stop.wait(self._every):
                self._checkpoint(conn)
            self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as error:
            if not self._failing:  # once per run of failures, not every time
                log.warning("WAL checkpoint of %s failed (%s); trying again", self._path, error)
            self._failing = True
        else:
            self._failing = False
