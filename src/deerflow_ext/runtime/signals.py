"""Run signals between Gateway processes: PostgreSQL ``LISTEN/NOTIFY`` on one channel.

A run lives in the process that created it (its task, its stream), but a cancel or a
follow-up may arrive at any process behind the load balancer. Two signals cross over:

* ``cancel``: stop run ``run_id`` (the cancel route, received by a process that does not
  own the run);
* ``interrupt``: a follow-up run was created on ``thread_id`` — every process interrupts
  its own runs on that thread that were created before it (the newest request wins).

Other kinds of message can be subscribed to (:meth:`PostgresRunSignals.subscribe`): crons
changed through another process wake this process's scheduler.

Why NOTIFY rather than a polled cancel flag: delivery is immediate and costs nothing while
idle, and the listener is one dedicated asyncpg connection per process (``add_listener``).
A notification sent while a listener is reconnecting is lost; the sender records every stop
request on the runs' rows first, and ``RunManager`` applies recorded requests after every
reconnect and every few seconds while it has runs in flight (the durable backstop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from ..background_task import stop_task

__all__ = ["CHANNEL", "PostgresRunSignals", "RunSignalHandler", "RunSignals"]

logger = logging.getLogger("deerflow_ext.runtime")

CHANNEL = "deerflow_runs"


class RunSignalHandler(Protocol):
    """What a process does when another process signals (``RunManager`` implements it)."""

    def cancel(self, run_id: str, *, rollback: bool = False) -> bool: ...

    def interrupt_thread(
        self, thread_id: str, *, by_run_id: str, created_before: datetime | None, rollback: bool = False
    ) -> int: ...

    def recheck(self) -> None:
        """Signals may have been missed (the listener reconnected): look at the recorded ones."""
        ...


class RunSignals(Protocol):
    """Sends run signals to every Gateway process sharing the database."""

    async def publish_cancel(self, run_id: str, *, rollback: bool = False) -> None: ...

    async def publish_interrupt(
        self, thread_id: str, run_id: str, created_at: datetime | None, *, rollback: bool = False
    ) -> None: ...

    async def aclose(self) -> None: ...


class PostgresRunSignals:
    """Publishes with ``pg_notify`` and listens on a dedicated asyncpg connection."""

    def __init__(self, dsn: str, *, reconnect_delay: float = 1.0) -> None:
        self._dsn = dsn
        self._reconnect_delay = reconnect_delay
        self._handler: RunSignalHandler | None = None
        self._listener: Any = None
        self._publisher: Any = None
        self._publish_lock = asyncio.Lock()
        self._lost = asyncio.Event()
        self._watchdog: asyncio.Task[None] | None = None
        self._subscribers: dict[str, Callable[[], None]] = {}

    async def start(self, handler: RunSignalHandler) -> None:
        """Listen for signals and hand them to ``handler``; raises when PostgreSQL is unreachable."""
        self._handler = handler
        await self._listen()
        self._watchdog = asyncio.create_task(self._keep_listening(), name="deerflow-run-signals")

    def subscribe(self, kind: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` on every message of ``kind`` another part of the host publishes on
        this channel (e.g. crons changed: ``scheduling``), and after a reconnect, when some may
        have been missed. Its senders notify in their own transactions (``pg_notify``)."""
        self._subscribers[kind] = callback

    async def _listen(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(self._dsn)
        await conn.add_listener(CHANNEL, self._on_notification)
        conn.add_termination_listener(lambda _conn: self._lost.set())
        self._listener = conn
        self._lost.clear()

    async def _keep_listening(self) -> None:
        while True:
            await self._lost.wait()
            logger.warning("run-signal listener lost its connection; reconnecting")
            while True:
                await asyncio.sleep(self._reconnect_delay)
                try:
                    await self._listen()
                    break
                except Exception as exc:
                    logger.warning("run-signal listener could not reconnect: %s", exc)
            if self._handler is not None:
                self._handler.recheck()
            for callback in self._subscribers.values():
                callback()

    def _on_notification(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        handler = self._handler
        if handler is None:
            return
        try:
            message = json.loads(payload)
            rollback = bool(message.get("rollback", False))
            if message.get("kind") == "cancel":
                if handler.cancel(str(message["run_id"]), rollback=rollback):
                    logger.info("run %s cancelled on request of another Gateway process", message["run_id"])
            elif message.get("kind") in self._subscribers:
                self._subscribers[message["kind"]]()
            elif message.get("kind") == "interrupt":
                before = message.get("created_at")
                handler.interrupt_thread(
                    str(message["thread_id"]),
                    by_run_id=str(message["run_id"]),
                    created_before=datetime.fromisoformat(before) if before else None,
                    rollback=rollback,
                )
        except Exception:
            logger.exception("ignoring a malformed run signal %r", payload)

    async def _notify(self, message: dict[str, Any]) -> None:
        import asyncpg

        payload = json.dumps(message)
        async with self._publish_lock:
            for attempt in (1, 2):
                try:
                    if self._publisher is None or self._publisher.is_closed():
                        self._publisher = await asyncpg.connect(self._dsn)
                    await self._publisher.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)
                    return
                except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError):
                    self._publisher = None
                    if attempt == 2:
                        raise

    async def publish_cancel(self, run_id: str, *, rollback: bool = False) -> None:
        await self._notify({"kind": "cancel", "run_id": run_id, "rollback": rollback})

    async def publish_interrupt(
        self, thread_id: str, run_id: str, created_at: datetime | None, *, rollback: bool = False
    ) -> None:
        await self._notify(
            {
                "kind": "interrupt",
                "thread_id": thread_id,
                "run_id": run_id,
                "created_at": created_at.isoformat() if created_at else None,
                "rollback": rollback,
            }
        )

    async def aclose(self) -> None:
        await stop_task(self._watchdog)
        for conn in (self._listener, self._publisher):
            if conn is not None and not conn.is_closed():
                with contextlib.suppress(Exception):
                    await conn.close(timeout=2)
        self._listener = self._publisher = None
        self._handler = None
