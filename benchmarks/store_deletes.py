"""What a stateless run's store work costs, its thread deleted at the end, counted in
instructions, on SQLite or PostgreSQL.

Run: ``PYTHONPATH=src python benchmarks/store_deletes.py [--runs N] [--postgres URL]
[--baseline DIR]``. Needs valgrind (Debian's ``valgrind``); not a test. Prints the
instructions per run of this checkout's ``HostStore`` and, with ``--baseline``, of another
checkout's, and their ratio.

Why: a stateless run (``POST /runs/wait`` without a thread) makes a thread, runs on it and
deletes it, so ``HostStore.delete_thread`` is on its path as a run's own rows are. Its
writer was moved from the async engine's ORM sessions (aiosqlite; asyncpg under
SQLAlchemy) to the store's transaction functions (pysqlite; psycopg), the writers of every
other store transaction (docs/ARCHITECTURE.md, "How a run's rows are written"); this counts
what that costs the process, every thread of it (callgrind counts them all), the database
server's own work aside. Each arm is its own process on its own database (a SQLite file,
or a PostgreSQL database made for it and dropped after), the migrations applied; the first
``WARMUP`` runs are not counted; hash seed fixed, a full collection before counting, as
``store_instructions.py`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import uuid
from pathlib import Path

import psycopg
from callgrind import against_baseline, counted_run, instrument, report, require, seeded_environment

WARMUP = 200


async def _child(runs: int, url: str) -> None:
    # Imported here: the child's PYTHONPATH names the checkout it measures.
    from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head

    engine = create_engine(url)
    await upgrade_head(engine)
    store = HostStore(make_session_factory(engine))

    async def run(n: int) -> None:
        thread = await store.create_thread({"n": n})
        run_id = f"run-{n}"
        await store.create_run(thread.id, run_id, {"messages": []}, owner="bench", thread_defaults={"graph_id": "g"})
        await store.mark_started(run_id, thread.id)
        await store.finish_run(
            run_id, status="success", outcome="success", answer="hi", thread_id=thread.id, thread_status="idle"
        )
        if await store.delete_thread(thread.id) is not True:
            raise SystemExit(f"store_deletes: thread {thread.id} was not deleted")

    for n in range(WARMUP):
        await run(n)
    gc.collect()
    instrument(os.getpid(), True)
    for n in range(WARMUP, WARMUP + runs):
        await run(n)
    instrument(os.getpid(), False)
    await store.aclose()
    await engine.dispose()


def _database(postgres: str | None, tmp: Path, name: str) -> tuple[str, str | None]:
    """The arm's database URL, and the PostgreSQL database to drop after (or ``None``)."""
    if postgres is None:
        (tmp / name).mkdir()
        return f"sqlite+aiosqlite:///{tmp / name / 'store.db'}", None
    database = f"store_deletes_{name}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    base, _, _ = postgres.rpartition("/")
    return f"{base.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{database}", database


def _count(tree: Path, runs: int, postgres: str | None, tmp: Path, name: str) -> float:
    url, database = _database(postgres, tmp, name)
    child = [sys.executable, __file__, "--child", url, "--runs", str(runs)]
    env = seeded_environment(PYTHONPATH=str(tree / "src"))
    try:
        return counted_run("store_deletes", name, tmp / f"{name}.out", child, env) / runs
    finally:
        if postgres is not None and database is not None:
            with psycopg.connect(postgres, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def main(runs: int, postgres: str | None, baseline: str | None) -> None:
    require("store_deletes")
    counts = against_baseline(lambda tree, tmp, name: _count(tree, runs, postgres, tmp, name), baseline)
    where = "PostgreSQL" if postgres else "SQLite"
    report(counts, f"{where}, {runs} stateless runs after {WARMUP} under callgrind")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="measured runs per arm")
    parser.add_argument("--postgres", help="a PostgreSQL server URL (postgresql://user@host:port/postgres)")
    parser.add_argument("--baseline", help="another checkout (`git archive` of the commit before) to count alike")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.runs, args.child))
    else:
        main(args.runs, args.postgres, args.baseline)
