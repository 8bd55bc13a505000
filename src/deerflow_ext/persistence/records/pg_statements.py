"""PostgreSQL's own statements on threads and runs: each joins what SQLite does in a
transaction of several statements into one, so a write is one round trip.

The store sends the first three from the event loop in autocommit (``loop_statements``):
one round trip where a transaction of two statements is four on a network (BEGIN, both,
COMMIT; docs/ARCHITECTURE.md, "How a run's rows are written"). No bound name in them is a
column's (``on_thread``, ``run_<column>``, ``new_<column>``): SQLAlchemy would also SET it
in the updates.

"Mark a run interrupted" is here in the text the runtime's sweeps compose into their own
one-round-trip statements (``runtime.pg_coordinator``, ``runtime.presence``): on the
database's clock, from ``statements.INTERRUPTED_RUN`` and the ``models`` enums, as the
Core form every dialect's store runs (``statements.INTERRUPT_RUNS``).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import JSON, Text, bindparam, func, insert, literal, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from ..models import RunStatus, ThreadStatus
from ..webhook_table import WEBHOOK_OUTBOX
from .statements import INTERRUPT_OLDER, INTERRUPTED_RUN, RUNS, START_RUN, THREADS

__all__ = [
    "OWED_RETURNING",
    "START_RUN_AND_THREAD",
    "create_run_statement",
    "finish_run_and_thread",
    "finish_run_with_outbox",
    "interrupt_busy_thread",
    "interrupt_runs",
    "owed_webhooks",
    "status_is",
]

# The thread's row is locked before the run's, as a follow-up's insert locks them (thread,
# then its older runs): the other order let the two deadlock on a run starting while a
# follow-up on its thread was being written.
_THREAD_LOCKED = (
    select(THREADS.c.id)
    .where(THREADS.c.id == select(RUNS.c.thread_id).where(RUNS.c.id == bindparam("run_id")).scalar_subquery())
    .with_for_update()
    .cte("thread_locked")
)
_STARTED = START_RUN.where(select(_THREAD_LOCKED.c.id).exists()).returning(RUNS.c.thread_id).cte("started")
START_RUN_AND_THREAD = (
    update(THREADS)
    .where(THREADS.c.id == _STARTED.c.thread_id)
    .values(status=ThreadStatus.BUSY.value, updated_at=bindparam("now"))
    .add_cte(_THREAD_LOCKED, _STARTED)
)
"""A pending run started and its thread ``busy``; nothing written when it was not pending."""


@functools.cache
def finish_run_and_thread(run_columns: frozenset[str], thread_columns: frozenset[str]) -> Any:
    """The run's end and its thread's new values as one statement, built once per
    combination of columns written (bound as ``run_<name>`` / ``thread_<name>``).

    The thread's update is the statement and the run's a ``WITH`` it never reads, which
    PostgreSQL runs after the statement itself: the thread's row is locked first, as at the
    run's start, and the run's is updated even when the thread has no row."""
    ended = (
        update(RUNS)
        .where(RUNS.c.id == bindparam("run_id"))
        .values({name: bindparam(f"run_{name}") for name in sorted(run_columns)})
        .cte("ended")
    )
    return (
        update(THREADS)
        .where(THREADS.c.id == bindparam("on_thread"))
        .values({name: bindparam(f"thread_{name}") for name in sorted(thread_columns)})
        .add_cte(ended)
    )


OUTBOX_COLUMNS: tuple[str, ...] = tuple(WEBHOOK_OUTBOX.c.keys())


@functools.cache
def finish_run_with_outbox(run_columns: frozenset[str], thread_columns: frozenset[str] | None) -> Any:
    """:func:`finish_run_and_thread` (or the run's end alone, ``thread_columns`` None) and
    the webhook delivery the run owes, in the same one statement: the outbox row is
    committed with the run's final status or not at all. The outbox's values are bound as
    ``outbox_<column>``. Only a run with a ``webhook`` is sent this form."""
    outbox = (
        insert(WEBHOOK_OUTBOX)
        .values({name: bindparam(f"outbox_{name}", type_=WEBHOOK_OUTBOX.c[name].type) for name in OUTBOX_COLUMNS})
        .cte("owed")
    )
    ended = (
        update(RUNS)
        .where(RUNS.c.id == bindparam("run_id"))
        .values({name: bindparam(f"run_{name}") for name in sorted(run_columns)})
    )
    if thread_columns is None:
        return ended.add_cte(outbox)
    return (
        update(THREADS)
        .where(THREADS.c.id == bindparam("on_thread"))
        .values({name: bindparam(f"thread_{name}") for name in sorted(thread_columns)})
        .add_cte(ended.cte("ended"), outbox)
    )


@functools.cache
def create_run_statement(interrupting: bool) -> Any:
    """``run_writes.sqlite_insert_run``'s writes as one statement: the thread locked, the
    thread defaults it lacks merged into its metadata, the run inserted, and with
    ``interrupting`` the stop request on its older live runs. Its one row says how many runs
    were marked; no row when the thread does not exist (then nothing was written).

    The merge is ``jsonb``'s ``defaults || metadata`` (the thread's own keys win, as in the
    two-statement form), written only when a default key is missing; the stored text then
    has ``jsonb``'s key order, which JSON objects do not promise anyway."""
    found = select(THREADS.c.id).where(THREADS.c.id == bindparam("on_thread")).with_for_update().cte("found")
    have = sql_cast(THREADS.c.metadata, JSONB)
    merged = bindparam("defaults", type_=JSONB).op("||", return_type=JSONB)(have)
    filled = (
        update(THREADS)
        .where(THREADS.c.id == bindparam("on_thread"), ~have.has_all(bindparam("default_keys", type_=ARRAY(Text))))
        .values(metadata=sql_cast(merged, JSON), updated_at=bindparam("new_created_at"))
        .cte("filled")
    )
    columns = (
        "id",
        "status",
        "input",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "created_at",
        "owner",
        "user_id",
    )
    values = [bindparam(f"new_{name}", type_=RUNS.c[name].type) for name in columns]
    run = insert(RUNS).from_select([*columns, "thread_id"], select(*values, found.c.id)).returning(RUNS.c.id).cte("run")
    if not interrupting:
        return select(literal(0).label("marked")).select_from(found).add_cte(found, filled, run)
    older = INTERRUPT_OLDER.where(select(run.c.id).exists()).returning(RUNS.c.id).cte("older")
    marked = select(func.count()).select_from(older).scalar_subquery()
    return select(marked.label("marked")).select_from(found).add_cte(found, filled, run, older)


def status_is(status: RunStatus | ThreadStatus, column: str = "status") -> str:
    """``column = '<status>'`` for a statement's text (the enums' values hold no quote)."""
    return f"{column} = '{status.value}'"


_SET_INTERRUPTED = ", ".join(f"{name} = '{value}'" for name, value in INTERRUPTED_RUN.items())


def interrupt_runs(where: str, returning: str) -> str:
    """``UPDATE runs`` ending the runs ``where`` selects as interrupted, now on the
    database's clock, with the error ``:why``; ``RETURNING returning``. Text, not Core: the
    runtime's sweeps join it with an advisory lock and its other halves in one ``WITH``."""
    return (
        f"UPDATE runs SET {_SET_INTERRUPTED}, finished_at = clock_timestamp(), error = :why "
        f"WHERE {where} RETURNING {returning}"
    )


OWED_RETURNING = "id, thread_id, input, created_at, started_at"
"""What an interrupting ``UPDATE runs`` returns for :func:`owed_webhooks` to read."""


def owed_webhooks(ended: str) -> str:
    """``INSERT INTO webhook_outbox`` the deliveries owed by the runs the ``ended`` CTE (an
    :func:`interrupt_runs` returning :data:`OWED_RETURNING`) just interrupted, for those whose
    stored request has a ``webhook``: a run another process ends (its own process died) calls
    its webhook as its own end would have, in the same statement. The payload is
    ``webhooks.order``'s, built in SQL from the CTE's rows alone (no second read of ``runs``,
    so an empty CTE, the common case, costs nothing). For a sweep's ``WITH``."""
    payload = (
        "json_build_object('run_id', r.id, 'thread_id', r.thread_id, "
        "'assistant_id', coalesce(r.input->>'assistant_id', 'lead_agent'), 'created_at', r.created_at, "
        "'updated_at', clock_timestamp(), 'status', 'interrupted', "
        "'metadata', coalesce(r.input->'metadata', '{}'::json), "
        "'kwargs', r.input::jsonb - 'assistant_id' - 'metadata' - 'multitask_strategy', "
        "'multitask_strategy', coalesce(r.input->>'multitask_strategy', 'interrupt'), "
        "'run_started_at', r.started_at, 'run_ended_at', clock_timestamp(), 'values', NULL, 'error', NULL)"
    )
    return (
        f"INSERT INTO webhook_outbox ({', '.join(OUTBOX_COLUMNS)}) "
        f"SELECT gen_random_uuid()::text, r.id, r.thread_id, r.input->>'webhook', {payload}, 'pending', 0, "
        "clock_timestamp(), clock_timestamp(), clock_timestamp(), NULL, NULL "
        f"FROM {ended} r WHERE r.input->>'webhook' IS NOT NULL"
    )


def interrupt_busy_thread(where: str) -> str:
    """``UPDATE threads`` marking the ``busy`` thread ``where`` selects as interrupted."""
    return (
        f"UPDATE threads SET {status_is(ThreadStatus.INTERRUPTED)}, updated_at = clock_timestamp() "
        f"WHERE {where} AND {status_is(ThreadStatus.BUSY)}"
    )
