"""Whether PostgreSQL closed an idle psycopg connection, known without a round trip.

Pools check a connection when they hand it out: the checkpointer's (``pg_saver``) and the
host store's synchronous twin (``transactions``). ``pool_pre_ping``-style checks ask the
server each time, a round trip per checkout; after a PostgreSQL restart, or an
administrator terminating the sessions, the server has already told every idle connection,
so looking at the socket is enough.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg

__all__ = ["closed_by_server"]


def closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """True when ``conn`` is closed, broken, or its server has closed it; such a connection
    is closed here too, so a pool that takes it back never offers it again.

    An idle connection (autocommit, or outside a transaction) has nothing to read unless the
    server sent something unasked: its termination notice and end of stream. The check reads
    nothing and sends nothing (a zero-timeout ``poll`` of the socket, which, unlike
    ``select``, takes descriptors past 1023 too).
    """
    if conn.closed or conn.broken:
        return True
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        # libpq has not noticed: closed here, or the pool would take it back looking healthy.
        conn.close()
        return True
    return False
