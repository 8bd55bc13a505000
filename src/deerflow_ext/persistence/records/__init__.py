"""Threads and runs: what the host keeps of them, one module per concern behind ``HostStore``.

- ``values``: the frozen records the store hands out (rows never leave it).
- ``owners``: this process's identity on run rows, and whether another's is gone.
- ``statements``: every statement on threads and runs as SQLAlchemy Core (SQLite's, and
  PostgreSQL's transactions); ``pg_statements``: PostgreSQL's one-round-trip forms, and the
  text of "mark a run interrupted" the runtime's sweeps compose.
- ``thread_writes``, ``run_writes``, ``recovery``: the transaction functions.
- ``store``: ``HostStore``, which picks each operation's way per dialect.

Thread search is ``persistence.thread_search``; how a run's events move is the runtime's
(``runtime.stream``).
"""

from ..thread_search import ThreadQuery
from .owners import PROCESS_OWNER, owner_is_dead
from .statements import TEMPORARY
from .store import HostStore
from .values import RunRecord, ThreadNotFoundError, ThreadRecord, ThreadTTL

__all__ = [
    "PROCESS_OWNER",
    "TEMPORARY",
    "HostStore",
    "RunRecord",
    "ThreadNotFoundError",
    "ThreadQuery",
    "ThreadRecord",
    "ThreadTTL",
    "owner_is_dead",
]
