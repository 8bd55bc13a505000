"""Per-thread admission and the finalizing barrier, behind one small interface.

A run *holds* its thread from the moment it is admitted until its ``on_task_stop`` has
returned; the next run on that thread cannot start its lifecycle before then. That one
exclusive hold is both guarantees the spec asks for: two runs of a thread never execute at
once, and a follow-up never observes a half-finalized predecessor.

The interface is deliberately just "hold this thread": :class:`LocalThreadCoordinator` is
an asyncio lock per thread (one process, SQLite), and :class:`PostgresThreadCoordinator`
takes a session-level advisory lock on a dedicated connection, so the same guarantee holds
across Gateway processes sharing one PostgreSQL database. A process that dies loses its
connection, and PostgreSQL releases the lock with it — the lease bound is the server's
detection of the dead connection (TCP keepalive), which operators can tighten.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, runtime_checkable

__all__ = ["LocalThreadCoordinator", "PostgresThreadCoordinator", "ThreadCoordinator", "advisory_key"]


@runtime_checkable
class ThreadCoordinator(Protocol):
    """Grants one run at a time exclusive use of a thread."""

    def hold(self, thread_id: str, run_id: str) -> AbstractAsyncContextManager[None]:
        """Wait for the thread, then hold it until the context exits.

        Cancelling the waiting task gives up the wait without ever holding the thread.
        """
        ...

    async def aclose(self) -> None: ...


class LocalThreadCoordinator:
    """One asyncio lock per thread; locks are dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self._holders: dict[str, str] = {}

    def holder(self, thread_id: str) -> str | None:
        """The run currently holding ``thread_id`` (for tests and diagnostics)."""
        return self._holders.get(thread_id)

    @asynccontextmanager
    async def hold(self, thread_id: str, run_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        try:
            async with lock:
                self._holders[thread_id] = run_id
                try:
                    yield
                finally:
                    self._holders.pop(thread_id, None)
        finally:
            self._users[thread_id] -= 1
            if not self._users[thread_id]:
                del self._users[thread_id]
                del self._locks[thread_id]

    async def aclose(self) -> None:
        return None


def advisory_key(thread_id: str) -> int:
    """A stable signed 64-bit advisory-lock key for a thread id (same in every process)."""
    digest = hashlib.blake2b(f"deerflow:thread:{thread_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresThreadCoordinator:
    """Cross-process holds with PostgreSQL session advisory locks.

    Each hold checks out its own connection from the engine's pool and keeps it for the
    hold's duration: the lock belongs to that database session, so it is released by
    ``pg_advisory_unlock`` on exit, or by the server when the process dies. Within one
    process a local lock is taken first, so concurrent runs of one thread queue in FIFO
    order on the event loop instead of each pinning a pooled connection while waiting.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._local = LocalThreadCoordinator()

    @asynccontextmanager
    async def hold(self, thread_id: str, run_id: str) -> AsyncIterator[None]:
        from sqlalchemy import text

        key = advisory_key(thread_id)
        async with self._local.hold(thread_id, run_id), self._engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            await conn.commit()
            try:
                yield
            finally:
                # Shielded: a cancel arriving during release must not leave the session
                # holding the lock while the connection goes back to the pool.
                await asyncio.shield(_unlock(conn, key))

    async def aclose(self) -> None:
        return None


async def _unlock(conn: Any, key: int) -> None:
    from sqlalchemy import text

    await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    await conn.commit()
