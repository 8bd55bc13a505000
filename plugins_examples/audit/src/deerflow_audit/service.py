"""The writer service: migrations at start, one row per outcome, a final flush at stop.

It runs on the Gateway's loop, which owns the host's engine and session factory, so the
database is only ever touched from the loop that owns its connection pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert

from deerflow_extension_api import ExtensionData, ExtensionRuntimeDeps

from .buffer import AuditBuffer
from .migrate import upgrade
from .schema import TABLE_PREFIX, task_outcomes

__all__ = ["AuditSettings", "AuditWriter"]

logger = logging.getLogger("deerflow_audit")

_FLUSH_INTERVAL = 0.25
_LIST_LIMIT = 100


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """The entry's ``config:`` block.

    ``table_prefix`` may be repeated in ``config`` to make the config self-describing;
    it must then equal the prefix the migration chain creates, because renaming tables
    is a migration, not a setting.
    """

    flush_interval: float = _FLUSH_INTERVAL
    list_limit: int = _LIST_LIMIT

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AuditSettings:
        unknown = set(config) - {"flush_interval", "list_limit", "table_prefix"}
        if unknown:
            raise ValueError(f"unknown audit config key(s): {', '.join(sorted(unknown))}")
        prefix = config.get("table_prefix", TABLE_PREFIX)
        if prefix != TABLE_PREFIX:
            raise ValueError(f"the audit tables are named {TABLE_PREFIX}*; table_prefix {prefix!r} cannot rename them")
        flush_interval = float(config.get("flush_interval", _FLUSH_INTERVAL))
        list_limit = int(config.get("list_limit", _LIST_LIMIT))
        if flush_interval <= 0 or list_limit <= 0:
            raise ValueError("flush_interval and list_limit must be positive")
        return cls(flush_interval=flush_interval, list_limit=list_limit)


def _engine_of(session_factory: Any) -> Any:
    """The async engine behind an ``async_sessionmaker`` (its ``kw["bind"]``), or ``None``."""
    kw = getattr(session_factory, "kw", None)
    return kw.get("bind") if isinstance(kw, Mapping) else None


class AuditWriter:
    """Gateway service owning the audit tables.

    ``start`` fails (and is reported as a service failure) when the host has no
    database: an audit trail that silently writes nowhere would look complete.
    """

    def __init__(self, settings: AuditSettings | None = None) -> None:
        self.settings = settings or AuditSettings()
        self.session_factory: Any = None
        self._buffer: AuditBuffer | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.written = 0

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        if deps.session_factory is None:
            raise RuntimeError("the audit trail needs the host database (deps.session_factory is None)")
        app_store = deps.app_store if deps.app_store is not None else ExtensionData("audit")
        self.session_factory = deps.session_factory
        await self._migrate()
        self._buffer = app_store.get_or_init(AuditBuffer, AuditBuffer)
        self._wake = asyncio.Event()
        self._stopping = False
        self._buffer.attach(asyncio.get_running_loop(), self._wake)
        self._task = asyncio.create_task(self._run(), name="deerflow_audit writer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self._buffer is not None:
            self._buffer.detach()
            await self.flush()

    async def flush(self) -> int:
        """Write everything buffered now; returns the number of rows written."""
        if self._buffer is None or self.session_factory is None:
            return 0
        records = self._buffer.drain()
        if not records:
            return 0
        try:
            async with self.session_factory() as session:
                await session.execute(insert(task_outcomes), [r.as_row() for r in records])
                await session.commit()
        except Exception:
            self._buffer.requeue(records)
            raise
        self.written += len(records)
        return len(records)

    async def _migrate(self) -> None:
        engine = _engine_of(self.session_factory)
        if engine is not None:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade)
            return
        # A factory without a discoverable engine: migrate on one of its sessions' connection.
        async with self.session_factory() as session:
            conn = await session.connection()
            await conn.run_sync(upgrade)
            await session.commit()

    async def _run(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.flush_interval)
            self._wake.clear()
            try:
                await self.flush()
            except Exception:  # keep the records and retry on the next tick
                logger.exception("audit write failed; %d record(s) kept for retry", len(self._buffer or ()))
