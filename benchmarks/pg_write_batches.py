"""What one batch of the PostgreSQL checkpointer's writes costs: one ``executemany`` per kind
of statement against the batch joined into one statement (``persistence/joined_upserts.py``).

Run: ``PYTHONPATH=src python benchmarks/pg_write_batches.py [--url URL] [--batches N]
[--rounds R] [--runs-per-batch K]``. Not a test: it prints the CPU and wall time per batch,
measured side by side in one process (needs a PostgreSQL server; default the one on
127.0.0.1:5432, database ``test``).

A batch holds the writes of ``K`` runs of a trivial agent, made by LangGraph itself
(``RecordingPostgresSaver.record`` of ``put`` and ``put_writes``: a checkpoint with its blobs
and a task's writes, three steps a run), every batch on threads of its own so each row is
new, as in the Gateway. Arms, alternating within every round, on one asyncpg connection on
uvloop:

- ``apart``: each kind of statement with all its rows in one ``executemany``, in the order
  they first appear (the checkpointer's path before, and still its path for statements
  that cannot be joined);
- ``joined``: ``pg_loop_writes._send``, one statement a batch.

Client CPU is the process's (``time.process_time``); PostgreSQL's is its backend's
(``/proc/<pid>/stat``, Linux). Each figure is the median over rounds of the mean per batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
import uvloop
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg_pool import ConnectionPool

from deerflow_ext.adapters.langgraph_postgres_private import RecordingPostgresSaver, Statement
from deerflow_ext.persistence import pg_loop_writes
from deerflow_ext.persistence.asyncpg_form import asyncpg_form

Send = Callable[[Sequence[Statement], asyncpg.Connection], Awaitable[None]]


async def _apart(statements: Sequence[Statement], connection: asyncpg.Connection) -> None:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for statement in statements:
        grouped.setdefault(statement.query, []).extend(statement.rows)
    for query, rows in grouped.items():
        await connection.executemany(*await asyncpg_form(connection, query, rows))


def _run_writes(saver: RecordingPostgresSaver, thread_id: str) -> list[Statement]:
    """What one trivial run writes: three steps, each a checkpoint and a task's writes."""
    statements: list[Statement] = []
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for step in range(3):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [{"role": "user", "content": "hello"}] * (step + 1)}
        checkpoint["channel_versions"] = {"messages": f"{step + 1:032}.0.1"}
        saved, put = saver.record(saver.put, config, checkpoint, {"step": step}, {"messages": f"{step + 1:032}.0.1"})
        _, writes = saver.record(saver.put_writes, saved, [("messages", {"n": step})], f"task-{step}", "")
        statements += put + writes
        config = saved
    return statements


def _batches(saver: RecordingPostgresSaver, count: int, runs: int) -> list[list[Statement]]:
    tag = uuid.uuid4().hex[:8]
    return [
        [statement for run in range(runs) for statement in _run_writes(saver, f"bench-{tag}-{n}-{run}")]
        for n in range(count)
    ]


def _backend_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(url: str, batches: int, rounds: int, runs: int) -> None:
    connection = await asyncpg.connect(url)
    await connection.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    pool: Any = ConnectionPool(url, open=False)  # the recorder sends nothing
    saver = RecordingPostgresSaver(pool)
    with PostgresSaver.from_conn_string(url) as tables:
        tables.setup()  # LangGraph's own tables, if they are not there yet
    backend = await connection.fetchval("SELECT pg_backend_pid()")
    arms: dict[str, Send] = {"apart": _apart, "joined": pg_loop_writes._send}
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in arms}
    for send in arms.values():  # prepared statements and codecs, before measuring
        for batch in _batches(saver, 3, runs):
            await send(batch, connection)
    for round_ in range(rounds):
        for name in list(arms) if round_ % 2 == 0 else list(reversed(arms)):
            work = _batches(saver, batches, runs)
            cpu, backend_cpu, wall = time.process_time(), _backend_cpu(backend), time.perf_counter()
            for batch in work:
                await arms[name](batch, connection)
            figures[name].append(
                (
                    (time.process_time() - cpu) / batches * 1e6,
                    (_backend_cpu(backend) - backend_cpu) / batches * 1e6,
                    (time.perf_counter() - wall) / batches * 1e6,
                )
            )
    for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
        await connection.execute(f"DELETE FROM {table} WHERE thread_id LIKE 'bench-%'")
    await connection.close()
    medians = {name: [statistics.median(f[i] for f in rows) for i in range(3)] for name, rows in figures.items()}
    print(f"{batches} batches of {runs} run(s) each x {rounds} rounds; us per batch (medians of the rounds)")
    print(f"{'arm':<10}{'client CPU':>12}{'PostgreSQL CPU':>16}{'wall':>10}")
    for name, (cpu, backend_cpu, wall) in medians.items():
        print(f"{name:<10}{cpu:>12.0f}{backend_cpu:>16.0f}{wall:>10.0f}")
    (cpu, backend_cpu, wall), (base_cpu, base_backend, base_wall) = medians["joined"], medians["apart"]
    print(
        f"joined/apart: client CPU {cpu / base_cpu:.2f}x, PostgreSQL CPU {backend_cpu / base_backend:.2f}x, "
        f"wall {wall / base_wall:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test", help="a libpq URL")
    parser.add_argument("--batches", type=int, default=300, help="batches per arm per round")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds")
    parser.add_argument("--runs-per-batch", type=int, default=1, help="runs whose writes one batch holds")
    args = parser.parse_args()
    uvloop.run(main(args.url, args.batches, args.rounds, args.runs_per_batch))
