"""Cross-process thread holds on PostgreSQL: a session advisory lock plus an expiring lease.

Why both. The advisory lock is what excludes: PostgreSQL grants it to one session, wakes the
next waiter the moment it is released, and drops it by itself when the holder's connection
closes — which is what happens when a process on the database's host is SIGKILLed. But a
holder whose host vanished (power loss, partition, a frozen VM) leaves a TCP connection the
server may keep for minutes, and the lock with it. The lease row in ``thread_leases`` bounds
that: the holder refreshes ``expires_at`` every ``lease/3`` seconds *on the lock's own
connection*, and a waiter that finds the lease expired terminates exactly that backend
(``pg_terminate_backend`` of the pid recorded in the lease, and only while that pid still
holds the lock), so the thread is handed over within the lease bound.

The lease row is deleted on a normal release. A row still present when the next holder
gets the lock therefore means the previous holder died holding the thread: its runs on the
thread that are still ``pending``/``running`` are marked ``interrupted`` (takeover). A
sweeper task does the same for expired leases nobody is waiting for, so a killed run is
persisted as interrupted even when no follow-up arrives.

Fencing: a holder whose refresh fails (its backend was terminated, or the lease row is
gone) cancels the task that holds the thread, so its run ends as ``interrupted`` instead of
running on beside the new holder. The lease must therefore be longer than any stall of a
Gateway's event loop. All times are the database's clock (``clock_timestamp()``), never a
Gateway host's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ..persistence.engine import create_engine
from ..persistence.records import PROCESS_OWNER
from .coordinator import LocalThreadCoordinator, advisory_key
from .lease_refresh import LeaseRefresh
from .lock_session import LockSession, LockSessionLostError
from .presence import ProcessPresence

__all__ = ["DEFAULT_LEASE_SECONDS", "LEASE_ENV", "PostgresThreadCoordinator", "lease_seconds_from_env"]

logger = logging.getLogger("deerflow_ext.runtime")

DEFAULT_LEASE_SECONDS = 10.0
LEASE_ENV = "DEERFLOW_THREAD_LEASE_SECONDS"
_LOCK_NOT_AVAILABLE = "55P03"


def lease_seconds_from_env(default: float = DEFAULT_LEASE_SECONDS) -> float:
    """``$DEERFLOW_THREAD_LEASE_SECONDS`` (seconds, > 0) or ``default``."""
    raw = os.environ.get(LEASE_ENV)
    if not raw:
        return default
    value = float(raw)
    if value <= 0:
        raise ValueError(f"{LEASE_ENV} must be positive, got {raw!r}")
    return value


_CLAIM_STALE = text("SELECT run_id, owner FROM thread_leases WHERE thread_id = :t")
_INTERRUPT_DEAD = text(
    "UPDATE runs SET status = 'interrupted', outcome = 'aborted', finished_at = clock_timestamp(), "
    "error = 'the process running it stopped before it finished (thread lease taken over)' "
    "WHERE thread_id = :t AND status IN ('pending', 'running') AND id <> :me "
    "AND (id = :dead_run OR owner = :dead_owner) RETURNING id"
)
_THREAD_INTERRUPTED = text(
    "UPDATE threads SET status = 'interrupted', updated_at = clock_timestamp() WHERE id = :t AND status = 'busy'"
)
_NEW_LEASE = (
    "INSERT INTO thread_leases (thread_id, run_id, owner, backend_pid, acquired_at, expires_at) "
    "VALUES (:t, :r, :o, pg_backend_pid(), clock_timestamp(), clock_timestamp() + make_interval(secs => :s)) "
)
_FIRST_LEASE = text(_NEW_LEASE + "ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id")
# A free thread, the common case, in one round trip: the try-lock, then (only if it was
# granted: the insert reads the lock's row) the lease insert that ``_claim`` would do.
_TRY_LOCK_AND_LEASE = text(
    "WITH lock AS MATERIALIZED (SELECT pg_try_advisory_lock(:k) AS got), "
    "lease AS (INSERT INTO thread_leases (thread_id, run_id, owner, backend_pid, acquired_at, expires_at) "
    "SELECT :t, :r, :o, pg_backend_pid(), clock_timestamp(), clock_timestamp() + make_interval(secs => :s) "
    "FROM lock WHERE got ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id) "
    "SELECT got, EXISTS (SELECT 1 FROM lease) AS leased FROM lock"
)
# A release in one round trip. The unlock reads the delete's output, so the lease row is
# already deleted (uncommitted) when the next holder is woken: its insert waits for our
# commit instead of finding a leftover row and taking over from a live process.
_UNLEASE_AND_UNLOCK = text(
    "WITH gone AS (DELETE FROM thread_leases WHERE thread_id = :t AND run_id = :r RETURNING 1) "
    "SELECT pg_advisory_unlock(:k) FROM (SELECT count(*) FROM gone) AS deleted"
)
_UPSERT_LEASE = text(
    _NEW_LEASE + "ON CONFLICT (thread_id) DO UPDATE SET run_id = EXCLUDED.run_id, owner = EXCLUDED.owner, "
    "backend_pid = EXCLUDED.backend_pid, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at"
)
_REFRESH = text(
    "UPDATE thread_leases SET expires_at = clock_timestamp() + make_interval(secs => :s) "
    "WHERE thread_id = :t AND run_id = :r AND backend_pid = pg_backend_pid()"
)
_EXPIRED_HOLDER = text(
    "SELECT l.backend_pid FROM thread_leases l JOIN pg_locks k ON k.pid = l.backend_pid "
    "WHERE l.thread_id = :t AND l.expires_at < clock_timestamp() AND k.locktype = 'advisory' "
    "AND k.granted AND k.classid = :c AND k.objid = :o AND k.objsubid = 1 "
    "AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
_EXPIRED_LEASES = text("SELECT thread_id FROM thread_leases WHERE expires_at < clock_timestamp()")


def _lock_parts(key: int) -> dict[str, int]:
    """``pg_locks`` shows a bigint advisory key as (classid = high 32 bits, objid = low 32 bits)."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return {"c": unsigned >> 32, "o": unsigned & 0xFFFFFFFF}


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
    """

    def __init__(self, engine: Any, *, owner: str = PROCESS_OWNER, lease_seconds: float | None = None) -> None:
        # Its own pool, unbounded: a hold that waits for another process pins a connection
        # for the whole run, and the run itself needs the shared pool for its rows. Sharing
        # one bounded pool deadlocks as soon as there are as many such holds as pooled
        # connections. Made like the shared engine (persistence.engine): closed connections
        # are replaced at checkout.
        self._engine = create_engine(engine.url, pool_size=5, max_overflow=-1)
        self._local = LocalThreadCoordinator()
        self.owner = owner
        self.lease_seconds = lease_seconds if lease_seconds is not None else lease_seconds_from_env()
        # How long one blocking lock attempt lasts before the waiter re-checks the lease.
        self._poll = min(1.0, self.lease_seconds / 4)
        self._sweeper: asyncio.Task[None] | None = None
        # The process-level lease: queued runs of a dead process never hold a thread lease.
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
            lease = {"t": thread_id, "r": run_id, "o": self.owner, "s": self.lease_seconds}
            holder = asyncio.current_task()
            session = await self._shared_session()
            try:
                took = await self._take_shared(session, thread_id, run_id, key, lease)
            except LockSessionLostError:
                # It died before the statement ran (nothing was taken): once more, on a new one.
                session = await self._shared_session()
                took = await self._take_shared(session, thread_id, run_id, key, lease)
            target: LockSession | _OwnConnection
            if took:
                target = session
                session.holding(holder)
            else:
                target = await self._wait_for(thread_id, run_id, key, lease)
            refresh = self._lease_refresh(target, thread_id, run_id, holder)
            try:
                yield
            finally:
                await self._let_go(target, refresh, holder, thread_id, run_id, key)

    async def _shared_session(self) -> LockSession:
        async with self._opening:
            if self._shared is None or not self._shared.alive:
                if self._shared is not None:
                    await self._shared.aclose()  # back to the pool, which discards it
                self._shared = await LockSession.open(self._engine)
            return self._shared

    async def _take_shared(
        self, session: LockSession, thread_id: str, run_id: str, key: int, lease: dict[str, Any]
    ) -> bool:
        """Take a free thread on the shared session, in one round trip: whether it was free."""
        attempt = session.start(_TRY_LOCK_AND_LEASE, {"k": key, **lease})
        try:
            # Awaited directly (lock_session): a cancel stops only this wait, and the give-back
            # below is queued behind the try-lock, so a lock it took is given back.
            [(got, leased)] = await attempt
            if got and not leased:
                await self._claim(session, thread_id, run_id, lease)
            return bool(got)
        except BaseException:
            # Cancelled or failed, perhaps with the lock taken: it is given back on the
            # session, which other holds' locks live on, instead of ending the session.
            await asyncio.shield(self._give_back(session, attempt, thread_id, run_id, key))
            raise

    async def _give_back(
        self, session: LockSession, attempt: asyncio.Future[Any], thread_id: str, run_id: str, key: int
    ) -> None:
        with contextlib.suppress(BaseException):
            await attempt  # the try-lock completes on the session whatever happened to us
        if not attempt.cancelled() and isinstance(attempt.exception(), LockSessionLostError):
            return  # it never ran, and the session's locks are gone anyway
        try:
            # Unlocking a lock the session does not hold only answers false.
            await session.send(_UNLEASE_AND_UNLOCK, {"t": thread_id, "r": run_id, "k": key})
        except Exception:
            logger.exception("thread %s: could not give back its lock; ending the shared lock session", thread_id)
            await session.drop()

    async def _wait_for(self, thread_id: str, run_id: str, key: int, lease: dict[str, Any]) -> _OwnConnection:
        """A thread another process holds: wait for it on a connection of its own."""
        conn = await (await self._engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
        try:
            await self._acquire(conn, thread_id, key)
            await self._claim(conn, thread_id, run_id, lease)
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
            await self._break_expired(conn, thread_id, key)
        await conn.execute(text("SELECT set_config('lock_timeout', '0', false)"))

    async def _break_expired(self, conn: Any, thread_id: str, key: int) -> None:
        """Terminate the lock session of a holder whose lease ran out (a dead or stalled process)."""
        pid = (await conn.execute(_EXPIRED_HOLDER, {"t": thread_id, **_lock_parts(key)})).scalar()
        if pid is None:
            return
        logger.warning(
            "thread %s: the lease of its holder (backend %s) expired; terminating that session to take over",
            thread_id,
            pid,
        )
        await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})

    async def _claim(self, conn: Any, thread_id: str, run_id: str, lease: dict[str, Any]) -> None:
        """With the lock held: take over from a dead holder if there was one, then write our lease.

        No lease row (the last holder released) is one round trip: the insert that writes
        ours. A row left behind is read, taken over, then replaced.
        """
        if (await conn.execute(_FIRST_LEASE, lease)).first() is not None:
            return
        stale = (await conn.execute(_CLAIM_STALE, {"t": thread_id})).first()
        if stale is not None and stale.run_id != run_id:
            await self._take_over(conn, thread_id, stale.run_id, stale.owner, me=run_id)
        await conn.execute(_UPSERT_LEASE, lease)

    async def _take_over(self, conn: Any, thread_id: str, dead_run: str, dead_owner: str, *, me: str) -> None:
        # A holder of this very process that failed to delete its row is alive: its runs end
        # by themselves. Only another owner's leftovers are interrupted.
        if dead_owner == self.owner:
            return
        params = {"t": thread_id, "dead_run": dead_run, "dead_owner": dead_owner, "me": me}
        interrupted = (await conn.execute(_INTERRUPT_DEAD, params)).scalars().all()
        await conn.execute(_THREAD_INTERRUPTED, {"t": thread_id})
        logger.warning(
            "thread %s taken over from %s, which stopped holding it; run(s) marked interrupted: %s",
            thread_id,
            dead_owner,
            ", ".join(interrupted) or "none",
        )

    def _lease_refresh(
        self, target: LockSession | _OwnConnection, thread_id: str, run_id: str, holder: asyncio.Task[Any] | None
    ) -> LeaseRefresh:
        """The lease refreshed on the lock's own connection; a failed refresh fences the holder."""
        params = {"t": thread_id, "r": run_id, "s": self.lease_seconds}

        async def refresh() -> bool:
            return bool((await target.execute(_REFRESH, params)).rowcount)

        def lost(error: BaseException | None) -> None:
            reason = error or "lease taken over"
            logger.error("run %s lost its hold on thread %s (%s); interrupting it", run_id, thread_id, reason)
            if holder is not None:
                holder.cancel()

        return LeaseRefresh(refresh, self.lease_seconds / 3, lost, name=f"deerflow-lease-{thread_id}")

    async def _let_go(
        self,
        target: LockSession | _OwnConnection,
        refresh: LeaseRefresh,
        holder: asyncio.Task[Any] | None,
        thread_id: str,
        run_id: str,
        key: int,
    ) -> None:
        """Give the thread back; the statement runs whatever happens to the holder meanwhile."""
        refreshing = refresh.stop()
        params = {"t": thread_id, "r": run_id, "k": key}
        if isinstance(target, _OwnConnection):
            await asyncio.shield(self._release_own(target, refreshing, params, thread_id))
            return
        target.released(holder)
        # Queued now, with no turn of the loop before it (behind a refresh queued there), and
        # awaited directly (lock_session): a holder cancelled meanwhile leaves its end to
        # ``abandoned``.
        abandoned = functools.partial(self._abandoned_give_back, target, thread_id)
        try:
            await target.start(_UNLEASE_AND_UNLOCK, params, abandoned=abandoned)
        except Exception as exc:
            await self._not_given_back(target, thread_id, exc)

    async def _release_own(
        self, target: _OwnConnection, refreshing: asyncio.Task[None] | None, params: dict[str, Any], thread_id: str
    ) -> None:
        if refreshing is not None:
            await asyncio.wait((refreshing,))  # a connection of its own runs one statement at a time
        try:
            await target.send(_UNLEASE_AND_UNLOCK, params)
        except Exception as exc:
            await self._not_given_back(target, thread_id, exc)
            return
        await target.aclose()

    def _abandoned_give_back(self, session: LockSession, thread_id: str, error: BaseException | None) -> None:
        if error is not None:
            task = asyncio.ensure_future(self._not_given_back(session, thread_id, error))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _not_given_back(
        self, target: LockSession | _OwnConnection, thread_id: str, error: BaseException
    ) -> None:
        if isinstance(error, LockSessionLostError):
            logger.warning("thread %s: its lock ended with its session (%s)", thread_id, error)
            return
        # Ending the session releases the lock; a leftover lease row names a run that is
        # already persisted as finished, so a takeover changes nothing.
        logger.error("thread %s: releasing its hold failed; dropping the connection", thread_id, exc_info=error)
        await target.drop()

    # -- the sweeper -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start the heartbeat (presence.py) and the sweeper: expired leases nobody waits for
        are taken over and released."""
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
        """Take over every thread whose lease has expired and nobody holds; returns them."""
        async with self._engine.connect() as probe:
            expired = (await probe.execute(_EXPIRED_LEASES)).scalars().all()
        swept = []
        for thread_id in expired:
            if await self._sweep_thread(thread_id):
                swept.append(thread_id)
        return swept

    async def _sweep_thread(self, thread_id: str) -> bool:
        key = advisory_key(thread_id)
        conn = await (await self._engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
        try:
            got = (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar()
            if not got:
                await self._break_expired(conn, thread_id, key)
                return False  # a waiter (or the next sweep) gets it once the session is gone
            try:
                stale = (await conn.execute(_CLAIM_STALE, {"t": thread_id})).first()
                if stale is None:
                    return False
                await self._take_over(conn, thread_id, stale.run_id, stale.owner, me="")
                await conn.execute(
                    text("DELETE FROM thread_leases WHERE thread_id = :t AND run_id = :r"),
                    {"t": thread_id, "r": stale.run_id},
                )
                return True
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        finally:
            await conn.close()

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await self._presence.aclose()
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
        if self._shared is not None:
            await self._shared.aclose()
        await self._engine.dispose()


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
