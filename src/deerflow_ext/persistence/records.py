"""Reading and writing threads and runs.

Rows never leave this module: callers get frozen records, so a response can be built after
the session is closed and nothing downstream can mutate ORM state by accident.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import JSON, Connection, Row, Table, Text, bindparam, delete, func, insert, literal, or_, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncEngine

from ..tokens import TokenUsage
from . import sqlite_statements, thread_search
from .engine import SessionFactory
from .loop_statements import LoopStatements
from .models import THREAD_STATUS_AFTER, RunRow, RunStatus, ThreadRow, ThreadStatus, utcnow
from .thread_search import ThreadQuery
from .transactions import Transactions, transactions_for

__all__ = [
    "PROCESS_OWNER",
    "HostStore",
    "RunRecord",
    "ThreadNotFoundError",
    "ThreadQuery",
    "ThreadRecord",
    "owner_is_dead",
]

# The hot path (what every run writes and reads: a thread, a run, its start and end) runs
# Core statements on a connection, not ORM sessions: the session's unit of work, identity map
# and ORM execution plugins cost more loop CPU than the statements (issue 16). The statements
# are built once, values bound at execution, so SQLAlchemy memoizes their cache keys too.
# Declarative models type ``__table__`` as a FromClause; it is a Table.
_THREADS = cast(Table, ThreadRow.__table__)
_RUNS = cast(Table, RunRow.__table__)
_INSERT_THREAD = insert(_THREADS)
_INSERT_RUN = insert(_RUNS)
_SELECT_THREAD = select(_THREADS).where(_THREADS.c.id == bindparam("thread_id"))
_SELECT_RUN = select(_RUNS).where(_RUNS.c.id == bindparam("run_id"), _RUNS.c.thread_id == bindparam("thread_id"))
_START_RUN = (
    update(_RUNS)
    .where(_RUNS.c.id == bindparam("run_id"), _RUNS.c.status == RunStatus.PENDING.value)
    .values(status=RunStatus.RUNNING.value, started_at=bindparam("now"))
)
# SET from the parameters' keys: one statement for every combination of columns written.
_UPDATE_RUN = update(_RUNS).where(_RUNS.c.id == bindparam("run_id"))
_UPDATE_THREAD = update(_THREADS).where(_THREADS.c.id == bindparam("thread_id"))

#: The statuses of a run some process may still be executing.
_LIVE = (RunStatus.PENDING.value, RunStatus.RUNNING.value)
# Stop requests on live runs (``cancel_requested``), applied by whichever process runs them:
# a cancel's on one run; a follow-up's on the older runs of its thread. ``_LIVE`` spelled
# out, not ``IN``: a statement compiled once for the loop (``loop_statements``) has no
# expanding parameters.
_REQUEST_STOP = (
    update(_RUNS)
    .where(or_(*(_RUNS.c.status == status for status in _LIVE)))
    .values(cancel_requested=bindparam("action"))
)
_CANCEL_RUN = _REQUEST_STOP.where(_RUNS.c.id == bindparam("run_id"))
# The older runs of the follow-up ``run_id``'s thread (a column's own name cannot be a
# bindparam of an UPDATE: ``on_thread``).
_INTERRUPT_OLDER = _REQUEST_STOP.where(
    _RUNS.c.thread_id == bindparam("on_thread"),
    _RUNS.c.created_at < bindparam("created_before"),
    _RUNS.c.id != bindparam("run_id"),
)

# PostgreSQL joins a run's write and its thread's into one statement (a data-modifying
# WITH), sent from the event loop in autocommit (``loop_statements``): one round trip where
# SQLite's transaction of two statements is four on a network (BEGIN, both, COMMIT; issue 16).
# No bound name there is a column's (``on_thread``, ``run_<column>``, ``new_<column>``): as
# with ``_INTERRUPT_OLDER``, SQLAlchemy would also SET it in the updates.
_STARTED = _START_RUN.returning(_RUNS.c.thread_id).cte("started")
# The thread of the run this started, so nothing is written when the run was not pending.
_START_RUN_AND_THREAD = (
    update(_THREADS)
    .where(_THREADS.c.id == _STARTED.c.thread_id)
    .values(status=ThreadStatus.BUSY.value, updated_at=bindparam("now"))
    .add_cte(_STARTED)
)


@functools.cache
def _finish_run_and_thread(run_columns: frozenset[str], thread_columns: frozenset[str]) -> Any:
    """The run's end and its thread's new values as one PostgreSQL statement, built once per
    combination of columns written (bound as ``run_<name>`` / ``thread_<name>``)."""
    ended = (
        update(_RUNS)
        .where(_RUNS.c.id == bindparam("run_id"))
        .values({name: bindparam(f"run_{name}") for name in sorted(run_columns)})
        .cte("ended")
    )
    return (
        update(_THREADS)
        .where(_THREADS.c.id == bindparam("on_thread"))
        .values({name: bindparam(f"thread_{name}") for name in sorted(thread_columns)})
        .add_cte(ended)
    )


@functools.cache
def _create_run_statement(interrupting: bool) -> Any:
    """``_sqlite_insert_run``'s writes as one PostgreSQL statement: the thread locked, the thread
    defaults it lacks merged into its metadata, the run inserted, and with ``interrupting``
    the stop request on its older live runs. Its one row says how many runs were marked;
    no row when the thread does not exist (then nothing was written).

    The merge is ``jsonb``'s ``defaults || metadata`` (the thread's own keys win, as in the
    two-statement form), written only when a default key is missing; the stored text then
    has ``jsonb``'s key order, which JSON objects do not promise anyway."""
    found = select(_THREADS.c.id).where(_THREADS.c.id == bindparam("on_thread")).with_for_update().cte("found")
    have = sql_cast(_THREADS.c.metadata, JSONB)
    merged = bindparam("defaults", type_=JSONB).op("||", return_type=JSONB)(have)
    filled = (
        update(_THREADS)
        .where(_THREADS.c.id == bindparam("on_thread"), ~have.has_all(bindparam("default_keys", type_=ARRAY(Text))))
        .values(metadata=sql_cast(merged, JSON), updated_at=bindparam("new_created_at"))
        .cte("filled")
    )
    columns = ("id", "status", "input", "input_tokens", "output_tokens", "total_tokens", "created_at", "owner")
    values = [bindparam(f"new_{name}", type_=_RUNS.c[name].type) for name in columns]
    run = (
        insert(_RUNS).from_select([*columns, "thread_id"], select(*values, found.c.id)).returning(_RUNS.c.id).cte("run")
    )
    if not interrupting:
        return select(literal(0).label("marked")).select_from(found).add_cte(found, filled, run)
    older = _INTERRUPT_OLDER.where(select(run.c.id).exists()).returning(_RUNS.c.id).cte("older")
    marked = select(func.count()).select_from(older).scalar_subquery()
    return select(marked.label("marked")).select_from(found).add_cte(found, filled, run, older)


PROCESS_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
"""This process's identity on run rows: host, pid and a per-start token (pids get reused)."""


def owner_is_dead(owner: str | None, *, me: str = PROCESS_OWNER) -> bool:
    """Whether the process recorded as ``owner`` can no longer be executing its runs.

    Conservative about other machines: without a lease (the scale-out work) a run owned by a
    process on another host is left alone. On this host a missing pid, or our own pid with a
    different start token (a previous incarnation), is dead.
    """
    if owner is None:
        return True
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != socket.gethostname():
        return False
    if owner == me:
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    if pid == os.getpid():
        return True  # same pid, different token: an earlier process that used our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class ThreadNotFoundError(LookupError):
    """A run was asked for on a thread that does not exist (nothing was written)."""


@dataclass(frozen=True)
class ThreadRecord:
    id: str
    title: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, row: Row[Any]) -> ThreadRecord:
        """From a row of ``select(threads)`` (Core: its ``metadata`` column by name)."""
        return cls(row.id, row.title, row.status, row.created_at, row.updated_at, dict(row.metadata or {}))


@dataclass(frozen=True)
class RunRecord:
    id: str
    thread_id: str
    status: str
    outcome: str | None
    input: dict[str, Any]
    answer: str | None
    error: str | None
    tokens: TokenUsage
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    owner: str | None

    @classmethod
    def of(cls, row: Row[Any]) -> RunRecord:
        """From a row of ``select(runs)``."""
        return cls(
            row.id,
            row.thread_id,
            row.status,
            row.outcome,
            dict(row.input or {}),
            row.answer,
            row.error,
            TokenUsage.of(row),
            row.created_at,
            row.started_at,
            row.finished_at,
            row.owner,
        )


class HostStore:
    """The host's thread and run records over one session factory.

    The hot path (what every run writes and reads) is, on PostgreSQL, one statement each,
    sent from the event loop (``loop_statements``); on SQLite a transaction function through
    ``transactions`` (default: ``transactions_for`` the factory's engine: whole, on the loop
    or its thread). The cancel records and the other reads and writes are transaction
    functions on either; the rest uses the factory's sessions. :meth:`aclose` ends what the
    transactions and loop statements hold (threads, connections).
    """

    def __init__(self, session_factory: SessionFactory, transactions: Transactions | None = None) -> None:
        self.session_factory = session_factory
        # The factory's engine (a session made only to read its bind opens no connection).
        bind = session_factory().bind
        if not isinstance(bind, AsyncEngine):
            raise TypeError("HostStore needs a session factory bound to an AsyncEngine")
        self._tx = transactions if transactions is not None else transactions_for(bind)
        self._pg = LoopStatements.for_engine(bind)

    async def aclose(self) -> None:
        try:
            await self._tx.aclose()
        finally:
            if self._pg is not None:
                await self._pg.aclose()

    # -- threads ----------------------------------------------------------------------
    async def create_thread(
        self, metadata: dict[str, Any] | None = None, *, thread_id: str | None = None
    ) -> ThreadRecord:
        now = utcnow()
        new_id = thread_id or str(uuid.uuid4())
        record = ThreadRecord(new_id, None, ThreadStatus.IDLE.value, now, now, dict(metadata or {}))
        row = {
            "id": record.id,
            "title": None,
            "status": record.status,
            "created_at": now,
            "updated_at": now,
            "metadata": dict(record.metadata),
        }
        if self._pg is not None:
            await self._pg.execute(_INSERT_THREAD, row)
        else:
            await self._tx.write(sqlite_statements.execute, _INSERT_THREAD, row)
        return record

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        row = await self._first(_SELECT_THREAD, {"thread_id": thread_id})
        return ThreadRecord.of(row) if row is not None else None

    async def list_threads(self, *, limit: int = 100, offset: int = 0) -> list[ThreadRecord]:
        return await self.search_threads(ThreadQuery(limit=limit, offset=offset))

    async def search_threads(self, query: ThreadQuery) -> list[ThreadRecord]:
        """Threads matching ``query``, in its order (``thread_search``: filtered in SQL)."""
        return [ThreadRecord.of(r) for r in await self._tx.read(thread_search.search_threads, query)]

    async def count_threads(self, query: ThreadQuery) -> int:
        return await self._tx.read(thread_search.count_threads, query)

    async def update_thread_metadata(self, thread_id: str, patch: dict[str, Any]) -> ThreadRecord | None:
        """Merge ``patch`` into the thread's metadata (keys it names are replaced)."""
        return await self._tx.write(_merge_metadata, thread_id, patch)

    async def delete_thread(self, thread_id: str) -> bool | None:
        """Delete a thread and its runs: True; False when it does not exist; None when a run
        of it is ``pending``/``running`` in any process (the database, not this process's
        memory, knows every process's runs).

        The thread row is locked first (``FOR UPDATE`` on PostgreSQL; SQLite serialises
        writers anyway), so a run being created on it concurrently waits for the outcome.
        """
        async with self.session_factory.begin() as session:
            found = await session.scalar(select(ThreadRow.id).where(ThreadRow.id == thread_id).with_for_update())
            if found is None:
                return False
            busy = await session.scalar(
                select(RunRow.id).where(RunRow.thread_id == thread_id, RunRow.status.in_(_LIVE)).limit(1)
            )
            if busy is not None:
                return None
            # Runs first: SQLite honours ON DELETE CASCADE only with the foreign_keys pragma.
            await session.execute(delete(RunRow).where(RunRow.thread_id == thread_id))
            result = await session.execute(delete(ThreadRow).where(ThreadRow.id == thread_id))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    # -- runs -------------------------------------------------------------------------
    async def create_run(
        self,
        thread_id: str,
        run_id: str,
        run_input: dict[str, Any],
        *,
        owner: str,
        thread_defaults: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Persist a ``pending`` run on an existing thread (else ``ThreadNotFoundError``).

        ``thread_defaults`` are metadata keys the thread gets unless it has them already
        (what a run records on its thread). One transaction checks the thread, fills them in
        and inserts the run (on PostgreSQL one statement, ``_create_run_statement``): the
        Gateway's lookup of the thread and the run's row were two round trips and two commits
        per run before (issue 16).
        """
        record, _ = await self._insert_run(thread_id, run_id, run_input, owner, thread_defaults, None)
        return record

    async def create_follow_up(
        self,
        thread_id: str,
        run_id: str,
        run_input: dict[str, Any],
        *,
        owner: str,
        action: str,
        thread_defaults: dict[str, Any] | None = None,
    ) -> tuple[RunRecord, int]:
        """``create_run``, and in the same transaction the stop request ``action`` recorded on
        the thread's older ``pending``/``running`` runs (see :meth:`request_cancel`); returns
        the record and how many runs were marked.

        With several processes every interrupting run wrote that request in a transaction
        of its own, and signalled the other processes, even when the thread had no other
        run, which is nearly always: two commits and a ``pg_notify`` per run (issue 16).
        With the count the caller signals only when there is a run to stop.
        """
        return await self._insert_run(thread_id, run_id, run_input, owner, thread_defaults, action)

    async def _insert_run(
        self,
        thread_id: str,
        run_id: str,
        run_input: dict[str, Any],
        owner: str,
        thread_defaults: dict[str, Any] | None,
        action: str | None,
    ) -> tuple[RunRecord, int]:
        record = RunRecord(
            run_id, thread_id, RunStatus.PENDING.value, None, dict(run_input), None, None, TokenUsage(), utcnow(),
            None, None, owner,
        )  # fmt: skip
        new_run = {
            "id": run_id,
            "status": record.status,
            "input": run_input,
            "input_tokens": 0,
            "output_tokens": 0,
            "total_tokens": 0,
            "created_at": record.created_at,
            "owner": owner,
        }
        older = {"on_thread": thread_id, "created_before": record.created_at, "run_id": run_id, "action": action}
        if self._pg is None:
            marked = await self._tx.write(_sqlite_insert_run, new_run, older, thread_defaults)
        else:
            defaults = dict(thread_defaults or {})
            answer = await self._pg.first(
                _create_run_statement(action is not None),
                {
                    **{f"new_{name}": value for name, value in new_run.items()},
                    **older,
                    "defaults": defaults,
                    "default_keys": list(defaults),
                },
            )
            marked = None if answer is None else int(answer.marked)
        if marked is None:
            raise ThreadNotFoundError(thread_id)
        return record, marked

    async def mark_started(self, run_id: str, thread_id: str) -> bool:
        """Mark a ``pending`` run ``running`` and its thread ``busy``; False when it is not pending.

        Conditional on purpose: with several processes, another one may have ended a queued
        run meanwhile (its process looked dead: ``runtime.presence``), and a run must never
        be started after it was reported ended.
        """
        now = utcnow()
        if self._pg is not None:
            return bool(await self._pg.execute(_START_RUN_AND_THREAD, {"run_id": run_id, "now": now}))

        def tx(conn: Connection) -> bool:
            if not sqlite_statements.execute(conn, _START_RUN, {"run_id": run_id, "now": now}):
                return False
            busy = {"status": ThreadStatus.BUSY.value, "updated_at": now, "thread_id": thread_id}
            sqlite_statements.execute(conn, _UPDATE_THREAD, busy)
            return True

        return await self._tx.write(tx)

    async def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        outcome: str | None,
        answer: str | None = None,
        error: str | None = None,
        tokens: TokenUsage | None = None,
        thread_id: str | None = None,
        thread_status: str | None = None,
        title: str | None = None,
    ) -> None:
        """Record a run's end; with ``thread_id``, sync the thread in the same transaction.

        One transaction because a client that sees the run finished must also see the
        thread's new status and title, and a crash must not leave one updated without the
        other.
        """
        values: dict[str, Any] = {
            "status": status,
            "outcome": outcome,
            "finished_at": utcnow(),
            "error": error,
        }
        if answer is not None:
            values["answer"] = answer
        if tokens is not None:
            values.update(dataclasses.asdict(tokens))

        thread = _thread_values(thread_status, title) if thread_id is not None and thread_status is not None else None
        if self._pg is None:
            await self._tx.write(_sqlite_finish_run, run_id, values, thread_id, thread)
        elif thread is None:
            await self._pg.execute(_UPDATE_RUN, {**values, "run_id": run_id})
        else:
            joined = _finish_run_and_thread(frozenset(values), frozenset(thread))
            bound = {f"run_{k}": v for k, v in values.items()} | {f"thread_{k}": v for k, v in thread.items()}
            await self._pg.execute(joined, {**bound, "run_id": run_id, "on_thread": thread_id})

    async def get_run(self, thread_id: str, run_id: str) -> RunRecord | None:
        row = await self._first(_SELECT_RUN, {"run_id": run_id, "thread_id": thread_id})
        return RunRecord.of(row) if row is not None else None

    async def _first(self, statement: Any, params: dict[str, Any]) -> Any:
        """The first row ``statement`` reads (from the loop on PostgreSQL), or ``None``."""
        if self._pg is not None:
            return await self._pg.first(statement, params)
        return await self._tx.read(_first_row, statement, params)

    async def list_runs(
        self,
        thread_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        status: str | None = None,
        newest_first: bool = False,
    ) -> list[RunRecord]:
        runs = _RUNS.c
        order = (runs.created_at.desc(), runs.id.desc()) if newest_first else (runs.created_at, runs.id)
        statement = select(_RUNS).where(runs.thread_id == thread_id)
        if status is not None:
            statement = statement.where(runs.status == status)

        def tx(conn: Connection) -> Any:
            rows = conn.execute(statement.order_by(*order).limit(limit).offset(offset))
            return [RunRecord.of(r) for r in rows]

        return await self._tx.read(tx)

    async def delete_run(self, thread_id: str, run_id: str) -> bool:
        async with self.session_factory.begin() as session:
            result = await session.execute(delete(RunRow).where(RunRow.id == run_id, RunRow.thread_id == thread_id))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def request_cancel(self, action: str, *, run_id: str) -> int:
        """Record a stop request on a live run (its owner applies it even if the signal that
        carries it is lost); 1 when the run was live, else 0. A follow-up's requests on its
        thread's older runs are written with its row (:meth:`create_follow_up`)."""

        def tx(conn: Connection) -> Any:
            return int(conn.execute(_CANCEL_RUN, {"run_id": run_id, "action": action}).rowcount)

        return await self._tx.write(tx)

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The recorded stop requests of ``run_ids`` (run id -> action)."""
        if not run_ids:
            return {}
        runs = _RUNS.c

        def tx(conn: Connection) -> Any:
            rows = conn.execute(
                select(runs.id, runs.cancel_requested).where(runs.id.in_(run_ids), runs.cancel_requested.is_not(None))
            )
            return {run_id: str(action) for run_id, action in rows}

        return await self._tx.read(tx)

    async def has_live_run(self, thread_id: str) -> bool:
        """Whether any process has a run of the thread pending or running."""
        runs = _RUNS.c

        def tx(conn: Connection) -> Any:
            found = conn.scalar(select(runs.id).where(runs.thread_id == thread_id, runs.status.in_(_LIVE)).limit(1))
            return found is not None

        return await self._tx.read(tx)

    async def interrupt_orphaned_runs(self, *, is_dead: Callable[[str | None], bool] = owner_is_dead) -> Sequence[str]:
        """Mark runs left ``pending``/``running`` by a dead process as ``interrupted``.

        Their threads go to ``interrupted`` too, so a client polling a thread never sees it
        ``busy`` forever after a crash. Returns the ids of the runs it changed.
        """
        async with self.session_factory.begin() as session:
            rows = (
                await session.execute(select(RunRow.id, RunRow.thread_id, RunRow.owner).where(RunRow.status.in_(_LIVE)))
            ).all()
            orphaned = [(run_id, thread_id) for run_id, thread_id, owner in rows if is_dead(owner)]
            if not orphaned:
                return ()
            now = utcnow()
            run_ids = [run_id for run_id, _ in orphaned]
            await session.execute(
                update(RunRow)
                .where(RunRow.id.in_(run_ids), RunRow.status.in_(_LIVE))
                .values(
                    status=RunStatus.INTERRUPTED.value,
                    outcome="aborted",
                    finished_at=now,
                    error="the process running it stopped before it finished",
                )
            )
            await session.execute(
                update(ThreadRow)
                .where(ThreadRow.id.in_({t for _, t in orphaned}), ThreadRow.status == ThreadStatus.BUSY.value)
                .values(status=ThreadStatus.INTERRUPTED.value, updated_at=now)
            )
            return tuple(run_ids)

    async def settle_idle_busy_threads(self) -> Sequence[str]:
        """Threads ``busy`` without any ``pending``/``running`` run: give each its last run's status.

        ``busy`` means "a run holds it"; with no live run nothing will ever clear it. Earlier
        versions could leave that behind (a cancel landing while a run was being admitted),
        and a thread stuck ``busy`` looks hung to every client. Safe with several processes:
        a run goes ``running`` and its thread ``busy`` in one transaction, and back together.
        Returns the ids of the threads it changed.
        """
        async with self.session_factory.begin() as session:
            has_live_run = select(RunRow.id).where(RunRow.thread_id == ThreadRow.id, RunRow.status.in_(_LIVE)).exists()
            busy = (
                await session.scalars(
                    select(ThreadRow.id).where(ThreadRow.status == ThreadStatus.BUSY.value, ~has_live_run)
                )
            ).all()
            for thread_id in busy:
                last = await session.scalar(
                    select(RunRow.status)
                    .where(RunRow.thread_id == thread_id)
                    .order_by(RunRow.created_at.desc(), RunRow.id.desc())
                    .limit(1)
                )
                await session.execute(
                    update(ThreadRow)
                    .where(ThreadRow.id == thread_id, ThreadRow.status == ThreadStatus.BUSY.value)
                    .values(status=THREAD_STATUS_AFTER.get(last or "", ThreadStatus.IDLE).value, updated_at=utcnow())
                )
            return tuple(busy)


_LOCK_THREAD = _SELECT_THREAD.with_for_update()
# A run's insert on SQLite reads only this: a process's SQLite transactions run one at a
# time (``transactions``), so nothing changes the row before the insert's own writes.
_THREAD_METADATA = select(_THREADS.c.metadata).where(_THREADS.c.id == bindparam("thread_id"))
_SET_THREAD_METADATA = (
    update(_THREADS)
    .where(_THREADS.c.id == bindparam("thread_id"))
    .values(metadata=bindparam("merged"), updated_at=bindparam("now"))
)


def _first_row(conn: Connection, statement: Any, params: dict[str, Any]) -> Row[Any] | None:
    return conn.execute(statement, params).first()


def _sqlite_insert_run(
    conn: Connection, new_run: dict[str, Any], older: dict[str, Any], thread_defaults: dict[str, Any] | None
) -> int | None:
    """SQLite's run insert (``HostStore._insert_run``): the thread locked, its missing
    defaults filled in, the run inserted, and with an ``action`` the stop request on the
    thread's older live runs; how many were marked, or ``None`` without the thread."""
    thread_id = older["on_thread"]
    found = sqlite_statements.first(conn, _THREAD_METADATA, {"thread_id": thread_id})
    if found is None:
        return None
    have = found[0] or {}
    missing = {key: value for key, value in (thread_defaults or {}).items() if key not in have}
    if missing:
        _set_metadata(conn, thread_id, {**have, **missing})
    sqlite_statements.execute(conn, _INSERT_RUN, {**new_run, "thread_id": thread_id})
    if older["action"] is None:
        return 0
    return sqlite_statements.execute(conn, _INTERRUPT_OLDER, older)


def _sqlite_finish_run(
    conn: Connection, run_id: str, values: dict[str, Any], thread_id: str | None, thread: dict[str, Any] | None
) -> None:
    """SQLite's end of a run (``HostStore.finish_run``): the run's row, then its thread's."""
    sqlite_statements.execute(conn, _UPDATE_RUN, {**values, "run_id": run_id})
    if thread is not None:
        sqlite_statements.execute(conn, _UPDATE_THREAD, {**thread, "thread_id": thread_id})


def _merge_metadata(conn: Connection, thread_id: str, patch: dict[str, Any]) -> ThreadRecord | None:
    """Merge ``patch`` into a thread's metadata inside ``conn``'s transaction, the row
    locked first (``FOR UPDATE`` on PostgreSQL; SQLite serialises writers anyway)."""
    found = conn.execute(_LOCK_THREAD, {"thread_id": thread_id}).first()
    if found is None:
        return None
    merged = {**(found.metadata or {}), **patch}
    now = _set_metadata(conn, thread_id, merged)
    return ThreadRecord(thread_id, found.title, found.status, found.created_at, now, merged)


def _set_metadata(conn: Connection, thread_id: str, metadata: dict[str, Any]) -> datetime:
    """Write a locked thread's whole metadata; returns its new ``updated_at``."""
    now = utcnow()
    sqlite_statements.execute(conn, _SET_THREAD_METADATA, {"thread_id": thread_id, "merged": metadata, "now": now})
    return now


def _thread_values(status: str, title: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if title:  # a run without a title keeps the thread's existing one
        values["title"] = title
    return values
