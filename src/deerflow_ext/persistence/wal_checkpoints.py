"""SQLite's WAL checkpoints made on a thread of their own, so the event loop's commits find
little left to copy.

In WAL mode a commit appends pages to the log, and the commit that takes the log past 1,000
pages copies it back into the database file (a *checkpoint*) and syncs both before it
returns. The store's and the checkpointer's SQLite connections commit on the event loop
(``one_thread``), so that commit stalled every run of the process: ~10 ms each on the
issue's VM, 2.9% of the loop's samples at 32 clients (issue 16, py-spy ``--native``).

:class:`WalCheckpoints` makes a ``PASSIVE`` checkpoint every :data:`CHECKPOINT_SECONDS` on
a connection of its own. ``PASSIVE`` copies what it can without waiting for any reader or
writer, and sqlite3 lets go of the GIL while it copies and syncs, so the loop goes on
meanwhile. The loop's connections keep SQLite's automatic checkpoint: theirs is the one
that completes a checkpoint while nothing newer is in the log, which lets the next writer
start the log over, so the log stays ~1,000 pages long (left to this thread alone, it grew
to the connections' bound in scratch). Their checkpoint now copies only the pages written
since this thread's last one. Durability does not change: a committed transaction is in the
log whether or not it has been copied yet.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from types import TracebackType

__all__ = ["CHECKPOINT_SECONDS", "WalCheckpoints"]

log = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 0.05
"""How often the thread checkpoints: a loop commit's checkpoint then copies at most ~50 ms of
commits (a few hundred pages at the issue's ~2,000 commits a second), not 1,000 pages."""


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
