"""Per-thread admission and the finalizing barrier, behind one small interface.

A run *holds* its thread from the moment it is admitted until its ``on_task_stop`` has
returned; the next run on that thread cannot start its lifecycle before then. That one
exclusive hold is both guarantees the spec asks for: two runs of a thread never execute at
once, and a follow-up never observes a half-finalized predecessor.

The interface is deliberately just "hold this thread": :class:`LocalThreadCoordinator` is
an asyncio lock per thread (one process, SQLite: no database round trip, no extra cost), and
``pg_coordinator.PostgresThreadCoordinator`` takes a session advisory lock whose holder's
process is known by its heartbeat, so the same guarantee holds across Gateway processes
sharing one PostgreSQL database, and a dead holder gives the thread up within the lease bound.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

__all__ = ["LocalThreadCoordinator", "ThreadCoordinator", "advisory_key"]


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
