"""Leadership for work that must happen once per deployment, not once per Gateway process.

Every Gateway process loads extensions and starts their services itself. Most services are
fine that way (a buffer flusher per process, a cache per process), but some must run once
across the deployment: a nightly compaction, a queue consumer that must not double-process,
a migration of the extension's own data. Such a service asks for leadership by name::

    from deerflow_ext.runtime.leader import try_leadership

    class Compactor:
        async def start(self, deps):
            self._lead = await try_leadership(deps.session_factory, "acme:compactor")
            if self._lead is not None:
                self._task = asyncio.create_task(self._compact_forever())

        async def stop(self):
            if self._lead is not None:
                await self._lead.release()

Why an advisory lock on a dedicated session: PostgreSQL grants it to exactly one session
and drops it when that session ends, so a leader that dies (or whose connection dies)
hands leadership over without any lease bookkeeping; a follower that wants to take over
calls ``try_leadership`` again periodically. ``Leadership.alive()`` tells a long-running
leader whether it still holds the lock's session. On SQLite there is one process by
construction, so every caller is the leader.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

from sqlalchemy import text

__all__ = ["Leadership", "leader_key", "try_leadership"]


def leader_key(name: str) -> int:
    """The advisory-lock key for ``name``; distinct from thread keys by its namespace."""
    digest = hashlib.blake2b(f"deerflow:leader:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Leadership:
    """A held leadership; release it when the service stops."""

    def __init__(self, name: str, conn: Any = None, key: int | None = None) -> None:
        self.name = name
        self._conn = conn
        self._key = key
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    async def alive(self) -> bool:
        """Whether this process still leads (the lock's session still answers)."""
        if self._released:
            return False
        if self._conn is None:
            return True
        try:
            await self._conn.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    async def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self._conn is None:
            return
        try:
            await self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})
            await self._conn.close()
        except Exception:
            # Closing the session releases the lock whatever state it was in.
            with contextlib.suppress(Exception):
                await self._conn.invalidate()


def _engine_of(session_factory_or_engine: Any) -> Any:
    kw = getattr(session_factory_or_engine, "kw", None)
    if isinstance(kw, dict) and kw.get("bind") is not None:
        return kw["bind"]
    return session_factory_or_engine


async def try_leadership(session_factory_or_engine: Any, name: str) -> Leadership | None:
    """Become the deployment's leader for ``name`` if nobody is; None when another process is.

    Accepts the ``session_factory`` services get in ``ExtensionRuntimeDeps`` (or an
    ``AsyncEngine``). Never waits: a follower decides itself when to ask again.
    """
    engine = _engine_of(session_factory_or_engine)
    if engine.dialect.name == "sqlite":
        return Leadership(name)
    key = leader_key(name)
    conn = await (await engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
    try:
        got = (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar()
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.invalidate()
        raise
    if not got:
        await conn.close()
        return None
    return Leadership(name, conn, key)
