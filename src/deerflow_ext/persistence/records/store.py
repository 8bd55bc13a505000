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
from ..models import RunStatus, ThreadStatus, utcnow
from ..thread_search import ThreadQuery
from ..transactions import Transactions, transactions_for
from . import pg_statements, recovery, run_writes, thread_writes
from .owners import owner_is_dead
from .statements import INSERT_THREAD, LIVE_RUN_OF_THREAD, SELECT_RUN, SELECT_RUN_BY_ID, SELECT_THREAD, UPDATE_RUN
from .values import RunRecord, ThreadNotFoundError, ThreadRecord

__all__ = ["HostStore"]


class HostStore:
    """The host's thread and run records over one session factory's engine.

    :meth:`aclose` ends what the transactions and loop statements hold (threads,
    connections). ``session_factory`` stays the owner's, for what is not a record here.
    """

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
    ) -> ThreadRecord:
        """A new thread; ``status`` other than idle is for a copy, which keeps its source's."""
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
    ) -> RunRecord:
        """Persist a ``pending`` run on an existing thread (else ``ThreadNotFoundError``).

        ``thread_defaults`` are metadata keys the thread gets unless it has them already
        (what a run records on its thread). One transaction checks the thread, fills them in
        and inserts the run (on PostgreSQL one statement,
        ``pg_statements.create_run_statement``): a lookup of the thread and the run's row
        would be two round trips and two commits per run.
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

        The count lets the caller signal the other processes only when there is a run to
        stop, which is nearly never: a request in a transaction of its own, and a
        ``pg_notify``, for every interrupting run would be two commits more per run.
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
    ) -> None:
        """Record a run's end; with ``thread_id``, sync the thread in the same transaction
        (its status, title and ``state_values``, what thread search's values filter reads).

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

        thread = None
        if thread_id is not None and thread_status is not None:
            thread = run_writes.thread_values(thread_status, title, state_values)
        if self._pg is None:
            await self._tx.write(run_writes.sqlite_finish_run, run_id, values, thread_id, thread)
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

    # -- recovery ---------------------------------------------------------------------
    async def interrupt_orphaned_runs(self, *, is_dead: Callable[[str | None], bool] = owner_is_dead) -> Sequence[str]:
        """Mark runs left ``pending``/``running`` by a dead process as ``interrupted``.

        Their threads go to ``interrupted`` too, so a client polling a thread never sees it
        ``busy`` forever after a crash. Returns the ids of the runs it changed.
        """
        return await self._tx.write(recovery.interrupt_orphaned_runs, is_dead)

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
