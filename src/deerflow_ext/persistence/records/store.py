"""``HostStore``: the host's threads and runs, each operation sent the way its dialect
writes it fastest (docs/ARCHITECTURE.md, "How a run's rows are written").

- PostgreSQL: what every run writes and reads (its thread, its row, its start and end, a
  read back) is one statement each (``pg_statements``), sent by asyncpg from the event loop
  (``loop_statements``); everything else a transaction function (``run_writes``,
  ``thread_writes``, ``recovery``) on the engine (``transactions``).
- SQLite: every operation a transaction function on pysqlite (``transactions``), the hot
  path's statements compiled once (``sqlite_statements``).

The store keeps rows; how a run's events move is the stream bridges' (``runtime.stream``).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Row
from sqlalchemy.ext.asyncio import AsyncEngine

from ...tokens import TokenUsage
from .. import sqlite_statements, thread_search
from ..engine import SessionFactory
from ..loop_statements import LoopStatements, aclose_after
from ..models import DEFAULT_USER_ID, RunStatus, ThreadStatus, utcnow
from ..thread_search import ThreadQuery
from ..transactions import Transactions, transactions_for
from . import journal, pg_statements, recovery, run_writes, thread_writes
from .owners import owner_is_dead
from .statements import INSERT_THREAD, LIVE_RUN_OF_THREAD, SELECT_RUN, SELECT_RUN_BY_ID, SELECT_THREAD, UPDATE_RUN
from .values import RunRecord, ThreadNotFoundError, ThreadRecord, ThreadTTL

__all__ = ["HostStore"]


class HostStore:
    """The host's thread and run records over one session factory's engine.

    :meth:`aclose` ends what the transactions and loop statements hold (threads,
    connections). ``session_factory`` stays the owner's, for what is not a record here.
    """

    default_ttl: ThreadTTL | None = None
    """The time to live of a thread created without one (``checkpointer.ttl.default_ttl``;
    set by the Gateway): every thread the host creates, a client's, a stateless run's or a
    cron's, gets it."""

    def __init__(self, session_factory: SessionFactory, transactions: Transactions | None = None) -> None:
        self.session_factory = session_factory
        # The factory's engine (a session made only to read its bind opens no connection).
        bind = session_factory().bind
        if not isinstance(bind, AsyncEngine):
            raise TypeError("HostStore needs a session factory bound to an AsyncEngine")
        self._tx = transactions if transactions is not None else transactions_for(bind)
        self._pg = LoopStatements.for_engine(bind)

    @property
    def transactions(self) -> Transactions:
        """Where this store's transaction functions run; other host tables' stores (crons)
        share it, so SQLite keeps one writing connection and one thread."""
        return self._tx

    async def aclose(self) -> None:
        await aclose_after(self._tx.aclose(), self._pg)

    # -- threads ----------------------------------------------------------------------
    async def create_thread(
        self,
        metadata: dict[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        status: ThreadStatus = ThreadStatus.IDLE,
        ttl: ThreadTTL | None = None,
    ) -> ThreadRecord:
        """A new thread; ``status`` other than idle is for a copy, which keeps its source's.
        ``ttl`` (else :attr:`default_ttl`) arms its expiry in the same insert."""
        now = utcnow()
        new_id = thread_id or str(uuid.uuid4())
        record = ThreadRecord(new_id, None, ThreadStatus(status).value, now, now, dict(metadata or {}))
        row = {
            "id": record.id,
            "title": None,
            "status": record.status,
            "created_at": now,
            "updated_at": now,
            "metadata": dict(record.metadata),
        }
        ttl = ttl or self.default_ttl
        if ttl is not None:  # a statement of its own shape: a thread without one pays nothing
            row.update(ttl.columns(now))
        if self._pg is not None:
            await self._pg.execute(INSERT_THREAD, row)
        else:
            await self._tx.write(sqlite_statements.execute, INSERT_THREAD, row)
        return record

    async def get_thread(self, thread_id: str, filters: Mapping[str, Any] | None = None) -> ThreadRecord | None:
        """The thread, or None; ``filters`` (an authorization handler's, ``owner_filter``)
        makes a thread whose metadata does not match one that is not found."""
        if filters:
            found = await self._tx.read(thread_search.find_thread, thread_id, filters)
            return ThreadRecord.of(found) if found is not None else None
        row = await self._first(SELECT_THREAD, {"thread_id": thread_id})
        return ThreadRecord.of(row) if row is not None else None

    async def list_threads(self, *, limit: int = 100, offset: int = 0) -> list[ThreadRecord]:
        return await self.search_threads(ThreadQuery(limit=limit, offset=offset))

    async def search_threads(self, query: ThreadQuery) -> list[ThreadRecord]:
        """Threads matching ``query``, in its order (``thread_search``: filtered in SQL)."""
        return [ThreadRecord.of(r) for r in await self._tx.read_aside(thread_search.search_threads, query)]

    async def count_threads(self, query: ThreadQuery) -> int:
        return await self._tx.read_aside(thread_search.count_threads, query)

    async def set_thread_state_values(self, thread_id: str, state_values: Mapping[str, Any]) -> None:
        """What a values filter reads of the thread, after its state changed outside a run
        (a state update, a copy); a run's end writes it with the run (``finish_run``)."""
        await self._tx.write(thread_writes.set_state_values, thread_id, dict(state_values))

    async def update_thread_metadata(
        self, thread_id: str, patch: dict[str, Any], filters: Mapping[str, Any] | None = None
    ) -> ThreadRecord | None:
        """Merge ``patch`` into the thread's metadata (keys it names are replaced); None
        when there is no such thread (matching ``filters``, when given)."""
        return await self._tx.write(thread_writes.merge_metadata, thread_id, patch, filters)

    async def delete_thread(self, thread_id: str, filters: Mapping[str, Any] | None = None) -> bool | None:
        """Delete a thread and its runs: True; False when it does not exist (or its metadata
        does not match ``filters``); None when a run of it is ``pending``/``running`` in any
        process (``thread_writes.delete_thread``)."""
        return await self._tx.write(thread_writes.delete_thread, thread_id, filters)

    # -- runs -------------------------------------------------------------------------
    async def create_run(
        self,
        thread_id: str,
        run_id: str,
        run_input: dict[str, Any],
        *,
        owner: str,
        thread_defaults: dict[str, Any] | None = None,
        user_id: str = DEFAULT_USER_ID,
    ) -> RunRecord:
        """Persist a ``pending`` run on an existing thread (else ``ThreadNotFoundError``).

        ``thread_defaults`` are metadata keys the thread gets unless it has them already
        (what a run records on its thread). One transaction checks the thread, fills them in
        and inserts the run (on PostgreSQL one statement,
        ``pg_statements.create_run_statement``): a lookup of the thread and the run's row
        would be two round trips and two commits per run.
        """
        record, _ = await self._insert_run(thread_id, run_id, run_input, owner, thread_defaults, None, user_id)
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
        user_id: str = DEFAULT_USER_ID,
    ) -> tuple[RunRecord, int]:
        """``create_run``, and in the same transaction the stop request ``action`` recorded on
        the thread's older ``pending``/``running`` runs (see :meth:`request_cancel`); returns
        the record and how many runs were marked.

        The count lets the caller signal the other processes only when there is a run to
        stop, which is nearly never: a request in a transaction of its own, and a
        ``pg_notify``, for every interrupting run would be two commits more per run.
        """
        return await self._insert_run(thread_id, run_id, run_input, owner, thread_defaults, action, user_id)

    async def _insert_run(
        self,
        thread_id: str,
        run_id: str,
        run_input: dict[str, Any],
        owner: str,
        thread_defaults: dict[str, Any] | None,
        action: str | None,
        user_id: str,
    ) -> tuple[RunRecord, int]:
        record = RunRecord(
            run_id, thread_id, RunStatus.PENDING.value, None, dict(run_input), None, None, TokenUsage(), utcnow(),
            None, None, owner, user_id,
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
            "user_id": user_id,
        }
        older = {"on_thread": thread_id, "created_before": record.created_at, "run_id": run_id, "action": action}
        if self._pg is None:
            marked = await self._tx.write(run_writes.sqlite_insert_run, new_run, older, thread_defaults)
        else:
            defaults = dict(thread_defaults or {})
            answer = await self._pg.first(
                pg_statements.create_run_statement(action is not None),
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
            return bool(await self._pg.execute(pg_statements.START_RUN_AND_THREAD, {"run_id": run_id, "now": now}))
        return await self._tx.write(run_writes.sqlite_start_run, run_id, thread_id, now)

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
        state_values: Mapping[str, Any] | None = None,
        webhook: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a run's end; with ``thread_id``, sync the thread in the same transaction
        (its status, title and ``state_values``, what thread search's values filter reads).

        One transaction because a client that sees the run finished must also see the
        thread's new status and title, and a crash must not leave one updated without the
        other. ``webhook``: the outbox row (``webhook_table``) of the delivery the run owes,
        written in that same transaction (no other round trip; a run without one sends the
        statements it always did).
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

        thread = None
        if thread_id is not None and thread_status is not None:
            thread = run_writes.thread_values(thread_status, title, state_values)
        if self._pg is None:
            await self._tx.write(run_writes.sqlite_finish_run, run_id, values, thread_id, thread, webhook)
        elif webhook is not None:
            owed = pg_statements.finish_run_with_outbox(
                frozenset(values), None if thread is None else frozenset(thread)
            )
            bound = {f"run_{k}": v for k, v in values.items()} | {f"outbox_{k}": v for k, v in webhook.items()}
            if thread is not None:
                bound |= {f"thread_{k}": v for k, v in thread.items()}
            await self._pg.execute(owed, {**bound, "run_id": run_id, "on_thread": thread_id})
        elif thread is None:
            await self._pg.execute(UPDATE_RUN, {**values, "run_id": run_id})
        else:
            joined = pg_statements.finish_run_and_thread(frozenset(values), frozenset(thread))
            bound = {f"run_{k}": v for k, v in values.items()} | {f"thread_{k}": v for k, v in thread.items()}
            await self._pg.execute(joined, {**bound, "run_id": run_id, "on_thread": thread_id})

    async def get_run(self, thread_id: str, run_id: str) -> RunRecord | None:
        row = await self._first(SELECT_RUN, {"run_id": run_id, "thread_id": thread_id})
        return RunRecord.of(row) if row is not None else None

    async def find_run(self, run_id: str) -> RunRecord | None:
        """The run with this id, on whichever thread: an A2A task is named by its run id alone."""
        row = await self._first(SELECT_RUN_BY_ID, {"run_id": run_id})
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
        return await self._tx.read(run_writes.list_runs, thread_id, limit, offset, status, newest_first)

    async def delete_run(self, thread_id: str, run_id: str) -> bool:
        return await self._tx.write(run_writes.delete_run, thread_id, run_id)

    async def request_cancel(self, action: str, *, run_id: str) -> int:
        """Record a stop request on a live run (its owner applies it even if the signal that
        carries it is lost); 1 when the run was live, else 0. A follow-up's requests on its
        thread's older runs are written with its row (:meth:`create_follow_up`)."""
        return await self._tx.write(run_writes.request_cancel, run_id, action)

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The recorded stop requests of ``run_ids`` (run id -> action)."""
        if not run_ids:
            return {}
        return await self._tx.read(run_writes.cancel_requests, run_ids)

    async def has_live_run(self, thread_id: str) -> bool:
        """Whether any process has a run of the thread pending or running (asked before most
        runs: from the loop on PostgreSQL, as a run's own reads are)."""
        return await self._first(LIVE_RUN_OF_THREAD, {"thread_id": thread_id}) is not None

    # -- the run journal (run evidence) -------------------------------------------------
    async def append_run_events(self, thread_id: str, rows: Sequence[dict[str, Any]]) -> int:
        """Append a run's events to its thread's journal in one transaction (``journal``)."""
        return await self._tx.write(journal.append_events, thread_id, list(rows))

    async def changed_runs(
        self, user_id: str | None, after: tuple[Any, str] | None, before: Any, limit: int
    ) -> list[Any]:
        """Runs by change position (``journal.changed_runs``); rows, not records: the feed
        needs the position, which a record does not carry."""
        return await self._tx.read_aside(journal.changed_runs, user_id, after, before, limit)

    async def visible_run(self, thread_id: str, run_id: str, user_id: str | None) -> Any:
        """The run's row when it is on ``thread_id`` and ``user_id``'s (any user's with None)."""
        return await self._tx.read(journal.run_of, thread_id, run_id, user_id)

    async def run_events(self, thread_id: str, run_id: str, after_seq: int | None, limit: int) -> list[Any]:
        """A page of a run's journal after ``after_seq``."""
        return await self._tx.read_aside(journal.run_events, thread_id, run_id, after_seq, limit)

    # -- recovery ---------------------------------------------------------------------
    async def interrupt_orphaned_runs(
        self, *, is_dead: Callable[[str | None], bool] = owner_is_dead, owed: recovery.OwedOnRecovery | None = None
    ) -> Sequence[str]:
        """Mark runs left ``pending``/``running`` by a dead process as ``interrupted``.

        Their threads go to ``interrupted`` too, so a client polling a thread never sees it
        ``busy`` forever after a crash. Returns the ids of the runs it changed.
        """
        return await self._tx.write(recovery.interrupt_orphaned_runs, is_dead, owed)

    async def temporary_threads_left(self, *, is_dead: Callable[[str | None], bool] = owner_is_dead) -> Sequence[str]:
        """Threads of stateless runs a dead process left behind (``recovery``): the caller
        deletes them with their checkpoints, as the process would have."""
        return await self._tx.read(recovery.temporary_threads_left, is_dead)

    async def settle_idle_busy_threads(self) -> Sequence[str]:
        """Threads ``busy`` without any ``pending``/``running`` run: give each its last run's status.

        ``busy`` means "a run holds it"; with no live run nothing will ever clear it. Earlier
        versions could leave that behind (a cancel landing while a run was being admitted),
        and a thread stuck ``busy`` looks hung to every client. Safe with several processes:
        a run goes ``running`` and its thread ``busy`` in one transaction, and back together.
        Returns the ids of the threads it changed.
        """
        return await self._tx.write(recovery.settle_idle_busy_threads)


def _first_row(conn: Connection, statement: Any, params: dict[str, Any]) -> Row[Any] | None:
    return conn.execute(statement, params).first()
