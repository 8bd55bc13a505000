"""Cross-process thread holds on PostgreSQL: a session advisory lock, and who holds it.

Why a lock. PostgreSQL grants an advisory lock to one session, wakes the next waiter the
moment it is released, and drops it by itself when the holder's connection closes — which
is what happens when a process on the database's host is SIGKILLed. Taking a free thread is
one statement that writes nothing; giving it back is one unlock.

Who holds it. Every connection of a coordinator names its process in ``application_name``
(:func:`application_name`: the md5 of the process's owner id, which SQL can compute from a
``gateway_processes`` row too), and every process keeps that row's heartbeat
(``presence``). So ``pg_locks`` and ``pg_stat_activity`` tell which process holds a thread,
and its row whether that process is alive. A holder whose host vanished (power loss, a
partition, a frozen VM) leaves a TCP connection the server may keep for minutes, and the
lock with it: a waiter that finds the holding session belongs to a process whose heartbeat
expired (or whose row is gone) terminates exactly that backend, so the thread is handed
over within the lease bound (heartbeats every lease/3, expired after ``lease`` seconds).

Takeover. A holder persists its run's end before it lets go, so a run still ``running`` on
a thread whose lock we now hold has no live holder: its process died or lost its session.
The statement that takes the lock interrupts such runs, and the queued runs of their
processes on the thread, in the same round trip; it writes nothing when there are none. A
sweeper does the same every lease/2 for threads with such runs that nobody takes, so a
killed run is persisted as interrupted even when no follow-up arrives.

Fencing: a hold checks every lease/3 that its session still holds the lock; a session that
died (terminated by a waiter, a restart) fails the check, and the task that held the thread
is cancelled, so its run ends as ``interrupted`` instead of running on beside the new
holder. The lease must therefore be longer than any stall of a Gateway's event loop. All
times are the database's clock (``clock_timestamp()``), never a Gateway host's.

Why no row per hold (docs/SCALE-OUT.md, "Thread admission and the finalizing barrier").
Holds used to write a lease row (``thread_leases``) when they took a thread and delete it
when they gave it back: two commits a run, each a WAL flush; a take and a give-back cost
the server 0.25 ms of CPU and 1.2 ms of wall time against 0.10 and 0.87 now. The heartbeat
every process already kept names a dead holder just as well. Processes of an earlier
release still write lease rows; they and these exclude each other by the same lock, but a
vanished host of an earlier release is not detected here (it holds until its connection
dies), so upgrade every process of a deployment together.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ..background_task import stop_task
from ..persistence.engine import create_engine
from ..persistence.records import PROCESS_OWNER
from .coordinator import LocalThreadCoordinator, advisory_key
from .lease_refresh import LeaseRefresh
from .lock_session import LockSession, LockSessionLostError
from .pg_hold_statements import (
    ABANDONED_THREADS,
    DEAD_HOLDER,
    STILL_HELD,
    TAKE,
    TAKE_OVER,
    TAKEN_OVER_WHY,
    UNLOCK,
    lock_parts,
)
from .presence import ProcessPresence

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "LEASE_ENV",
    "PostgresThreadCoordinator",
    "application_name",
    "lease_seconds_from_env",
]

logger = logging.getLogger("deerflow_ext.runtime")

DEFAULT_LEASE_SECONDS = 10.0
LEASE_ENV = "DEERFLOW_THREAD_LEASE_SECONDS"
_LOCK_NOT_AVAILABLE = "55P03"
_APPLICATION = "deerflow-ext "


def lease_seconds_from_env(default: float = DEFAULT_LEASE_SECONDS) -> float:
    """``$DEERFLOW_THREAD_LEASE_SECONDS`` (seconds, > 0) or ``default``."""
    raw = os.environ.get(LEASE_ENV)
    if not raw:
        return default
    value = float(raw)
    if value <= 0:
        raise ValueError(f"{LEASE_ENV} must be positive, got {raw!r}")
    return value


def application_name(owner: str) -> str:
    """The ``application_name`` of a process's coordinator connections: its owner id's md5,
    since an owner id (host, pid, token) may be longer than the 63 bytes PostgreSQL keeps."""
    return _APPLICATION + hashlib.md5(owner.encode(), usedforsecurity=False).hexdigest()


def _is_lock_timeout(exc: DBAPIError) -> bool:
    return getattr(exc.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE


class PostgresThreadCoordinator:
    """Holds threads across Gateway processes; see the module docstring for the protocol.

    The locks of free threads, the common case, are all taken on one session of this
    process (``lock_session``); a thread another process holds is waited for, then held, on
    a connection of its own. Within one process a local lock is taken first, so runs of one
    thread queue in FIFO order on the event loop instead of each pinning a connection while
    waiting, and never take one thread's lock twice on the shared session (where a second
    ``pg_try_advisory_lock`` would succeed: a session's advisory locks are re-entrant).

    :meth:`start` it before the first hold: it writes this process's heartbeat, and the
    session of a process without one is taken for a dead process's by other processes.
    """

    def __init__(self, engine: Any, *, owner: str = PROCESS_OWNER, lease_seconds: float | None = None) -> None:
        # Its own pool, unbounded: a hold that waits for another process pins a connection
        # for the whole run, and the run itself needs the shared pool for its rows. Sharing
        # one bounded pool deadlocks as soon as there are as many such holds as pooled
        # connections. Made like the shared engine (persistence.engine): closed connections
        # are replaced at checkout. Its sessions say whose they are (application_name).
        self._mine = application_name(owner)
        self._engine = create_engine(
            engine.url,
            pool_size=5,
            max_overflow=-1,
            connect_args={"server_settings": {"application_name": self._mine}},
        )
        self._local = LocalThreadCoordinator()
        self.owner = owner
        self.lease_seconds = lease_seconds if lease_seconds is not None else lease_seconds_from_env()
        # How long one blocking lock attempt lasts before the waiter re-checks the holder.
        self._poll = min(1.0, self.lease_seconds / 4)
        self._sweeper: asyncio.Task[None] | None = None
        # Every process's heartbeat: what tells a dead holder, and fails its queued runs.
        self._presence = ProcessPresence(self._engine, owner=owner, lease_seconds=self.lease_seconds)
        self._shared: LockSession | None = None
        self._opening = asyncio.Lock()
        # Give-backs whose holder was cancelled while they ran, seen to their end.
        self._releasing: set[asyncio.Future[None]] = set()

    # -- holding ---------------------------------------------------------------------------
    @asynccontextmanager
    async def hold(self, thread_id: str, run_id: str) -> AsyncIterator[None]:
        key = advisory_key(thread_id)
        async with self._local.hold(thread_id, run_id):
            holder = asyncio.current_task()
            session = await self._shared_session()
            try:
                took = await self._take_shared(session, thread_id, run_id, key)
            except LockSessionLostError:
                # It died before the statement ran (nothing was taken): once more, on a new one.
                session = await self._shared_session()
                took = await self._take_shared(session, thread_id, run_id, key)
            target: LockSession | _OwnConnection
            if took:
                target = session
                session.holding(holder)
            else:
                target = await self._wait_for(thread_id, run_id, key)
            check = self._lock_check(target, thread_id, run_id, key, holder)
            try:
                yield
            finally:
                await self._let_go(target, check, holder, thread_id, key)

    async def _shared_session(self) -> LockSession:
        async with self._opening:
            if self._shared is None or not self._shared.alive:
                if self._shared is not None:
                    await self._shared.aclose()  # back to the pool, which discards it
                self._shared = await LockSession.open(self._engine)
            return self._shared

    def _orphans(self, thread_id: str, run_id: str) -> dict[str, Any]:
        return {"t": thread_id, "r": run_id, "o": self.owner, "why": TAKEN_OVER_WHY}

    async def _take_shared(self, session: LockSession, thread_id: str, run_id: str, key: int) -> bool:
        """Take a free thread on the shared session, in one round trip: whether it was free."""
        attempt = session.start(TAKE, {"k": key, **self._orphans(thread_id, run_id)})
        try:
            # Awaited directly (lock_session): a cancel stops only this wait, and the give-back
            # below is queued behind the try-lock, so a lock it took is given back.
            [(got, interrupted, owners)] = await attempt
        except BaseException:
            # Cancelled or failed, perhaps with the lock taken: it is given back on the
            # session, which other holds' locks live on, instead of ending the session.
            await asyncio.shield(self._give_back(session, attempt, thread_id, key))
            raise
        _report_takeover(thread_id, owners, interrupted)
        return bool(got)

    async def _give_back(self, session: LockSession, attempt: asyncio.Future[Any], thread_id: str, key: int) -> None:
        with contextlib.suppress(BaseException):
            await attempt  # the try-lock completes on the session whatever happened to us
        if not attempt.cancelled() and isinstance(attempt.exception(), LockSessionLostError):
            return  # it never ran, and the session's locks are gone anyway
        try:
            # Unlocking a lock the session does not hold only answers false.
            await session.send(UNLOCK, {"k": key})
        except Exception:
            logger.exception("thread %s: could not give back its lock; ending the shared lock session", thread_id)
            await session.drop()

    async def _wait_for(self, thread_id: str, run_id: str, key: int) -> _OwnConnection:
        """A thread another process holds: wait for it on a connection of its own."""
        conn = await (await self._engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
        try:
            await self._acquire(conn, thread_id, key)
            await self._take_over(conn, thread_id, run_id)
        except BaseException:
            # Cancelled or failed mid-acquire: the session may hold the lock (granted as
            # the cancel arrived), so it must die rather than go back to the pool.
            await asyncio.shield(_discard(conn))
            raise
        return _OwnConnection(conn)

    async def _acquire(self, conn: Any, thread_id: str, key: int) -> None:
        """Wait for a thread the try-lock did not get. The try never jumps the queue:
        PostgreSQL hands a released lock straight to its first waiter."""
        await conn.execute(text("SELECT set_config('lock_timeout', :v, false)"), {"v": f"{int(self._poll * 1000)}ms"})
        while True:
            try:
                await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
                break
            except DBAPIError as exc:
                if not _is_lock_timeout(exc):
                    raise
            await self._break_dead_holder(conn, thread_id, key)
        await conn.execute(text("SELECT set_config('lock_timeout', '0', false)"))

    async def _break_dead_holder(self, conn: Any, thread_id: str, key: int) -> None:
        """Terminate the session holding the thread if its process's heartbeat expired."""
        params = {"prefix": _APPLICATION, "mine": self._mine, **lock_parts(key)}
        pid = (await conn.execute(DEAD_HOLDER, params)).scalar()
        if pid is None:
            return
        logger.warning(
            "thread %s: the process holding it (backend %s) stopped its heartbeat; terminating that session",
            thread_id,
            pid,
        )
        await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})

    async def _take_over(self, conn: Any, thread_id: str, run_id: str) -> None:
        """With the lock held: interrupt what the last holder left running."""
        [(interrupted, owners)] = (await conn.execute(TAKE_OVER, self._orphans(thread_id, run_id))).all()
        _report_takeover(thread_id, owners, interrupted)

    def _lock_check(
        self,
        target: LockSession | _OwnConnection,
        thread_id: str,
        run_id: str,
        key: int,
        holder: asyncio.Task[Any] | None,
    ) -> LeaseRefresh:
        """Every lease/3, whether the lock's own session still holds it; if not, the holder is fenced."""
        params = lock_parts(key)

        async def still_held() -> bool:
            return bool((await target.execute(STILL_HELD, params)).scalar())

        def lost(error: BaseException | None) -> None:
            reason = error or "the lock is no longer held"
            logger.error("run %s lost its hold on thread %s (%s); interrupting it", run_id, thread_id, reason)
            if holder is not None:
                holder.cancel()

        return LeaseRefresh(still_held, self.lease_seconds / 3, lost, name=f"deerflow-lease-{thread_id}")

    async def _let_go(
        self,
        target: LockSession | _OwnConnection,
        check: LeaseRefresh,
        holder: asyncio.Task[Any] | None,
        thread_id: str,
        key: int,
    ) -> None:
        """Give the thread back; the statement runs whatever happens to the holder meanwhile."""
        checking = check.stop()
        params = {"k": key}
        if isinstance(target, _OwnConnection):
            await asyncio.shield(self._release_own(target, checking, params, thread_id))
            return
        target.released(holder)
        # Queued now, with no turn of the loop before it (behind a check queued there), and
        # awaited directly (lock_session): a holder cancelled meanwhile leaves its end to
        # ``abandoned``.
        abandoned = functools.partial(self._abandoned_give_back, target, thread_id)
        try:
            await target.start(UNLOCK, params, abandoned=abandoned)
        except Exception as exc:
            await self._not_given_back(target, thread_id, exc)

    async def _release_own(
        self, target: _OwnConnection, checking: asyncio.Task[None] | None, params: dict[str, Any], thread_id: str
    ) -> None:
        if checking is not None:
            await asyncio.wait((checking,))  # a connection of its own runs one statement at a time
        try:
            await target.send(UNLOCK, params)
        except Exception as exc:
            await self._not_given_back(target, thread_id, exc)
            return
        await target.aclose()

    def _abandoned_give_back(self, session: LockSession, thread_id: str, error: BaseException | None) -> None:
        if error is not None:
            task = asyncio.ensure_future(self._not_given_back(session, thread_id, error))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _not_given_back(self, target: LockSession | _OwnConnection, thread_id: str, error: BaseException) -> None:
        if isinstance(error, LockSessionLostError):
            logger.warning("thread %s: its lock ended with its session (%s)", thread_id, error)
            return
        # Ending the session releases the lock; the run it held is already persisted as
        # finished, so the next holder finds nothing to take over.
        logger.error("thread %s: releasing its hold failed; dropping the connection", thread_id, exc_info=error)
        await target.drop()

    # -- the sweeper -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start the heartbeat (presence.py) and the sweeper: runs left running by dead
        processes on threads nobody takes are interrupted."""
        await self._presence.start()
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="deerflow-lease-sweeper")

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 2)
            try:
                await self.sweep()
            except Exception:
                logger.exception("lease sweep failed; retrying")

    async def sweep(self) -> list[str]:
        """Take over every thread a dead process left a run running on; returns them."""
        async with self._engine.connect() as probe:
            abandoned = (await probe.execute(ABANDONED_THREADS, {"me": self.owner})).scalars().all()
        swept = []
        for thread_id in abandoned:
            if await self._sweep_thread(thread_id):
                swept.append(thread_id)
        return swept

    async def _sweep_thread(self, thread_id: str) -> bool:
        key = advisory_key(thread_id)
        conn = await (await self._engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
        try:
            # The take every hold makes: the try-lock and, if granted, the takeover.
            got, interrupted, owners = (await conn.execute(TAKE, {"k": key, **self._orphans(thread_id, "")})).one()
            if not got:
                await self._break_dead_holder(conn, thread_id, key)
                return False  # a waiter (or the next sweep) gets it once the session is gone
            try:
                _report_takeover(thread_id, owners, interrupted)
                return bool(interrupted)
            finally:
                await conn.execute(UNLOCK, {"k": key})
        finally:
            await conn.close()

    async def aclose(self) -> None:
        await stop_task(self._sweeper)
        self._sweeper = None
        await self._presence.aclose()
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
        if self._shared is not None:
            await self._shared.aclose()
        await self._engine.dispose()


def _report_takeover(thread_id: str, owners: Sequence[str], interrupted: Sequence[str]) -> None:
    if interrupted:
        logger.warning(
            "thread %s taken over from %s, which stopped holding it; run(s) marked interrupted: %s",
            thread_id,
            ", ".join(owners),
            ", ".join(interrupted),
        )


class _OwnConnection:
    """A hold's own connection (a thread it had to wait for), used like the shared session."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        return await self._conn.execute(statement, parameters)

    async def send(self, statement: Any, parameters: Any) -> list[Any]:
        """:meth:`LockSession.send`'s counterpart: the statement's rows."""
        return list((await self._conn.execute(statement, parameters)).all())

    async def drop(self) -> None:
        await _discard(self._conn)

    async def aclose(self) -> None:
        await self._conn.close()


async def _discard(conn: Any) -> None:
    with contextlib.suppress(Exception):
        await conn.invalidate()
    with contextlib.suppress(Exception):
        await conn.close()
