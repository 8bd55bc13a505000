"""What a stateless run's store work costs, its thread deleted at the end: instructions
under callgrind, or runs a second side by side, on SQLite or PostgreSQL.

Run: ``PYTHONPATH=src python benchmarks/store_deletes.py [--runs N] [--postgres URL]
[--baseline DIR] [--timed ROUNDS [--clients N]]``. Not a test. Counted (the default; needs
valgrind, Debian's ``valgrind``): the instructions per run of this checkout's ``HostStore``
and, with ``--baseline``, of another checkout's, and their ratio. Timed (``--timed``, needs
``--baseline``): each round runs both checkouts one after the other, in alternating order,
``--clients`` concurrent callers each, and prints their runs a second; then the median of
the rounds' ratios.

Why: a stateless run (``POST /runs/wait`` without a thread) makes a thread, runs on it and
deletes it, so ``HostStore.delete_thread`` is on its path as a run's own rows are. Its
writer was moved from the async engine's ORM sessions (aiosqlite; asyncpg under
SQLAlchemy) to the store's transaction functions (pysqlite; psycopg), the writers of every
other store transaction (docs/ARCHITECTURE.md, "How a run's rows are written"). Callgrind
counts every thread of the process, the database server's work aside, and no load moves
its count; the timed rounds say what that is in wall time, with the noise of a shared
machine (hence the median of alternating rounds). Each arm is its own process on its own
database (a SQLite file, or a PostgreSQL database made for it and dropped after), the
migrations applied; the first ``WARMUP`` runs are not counted; hash seed fixed, a full
collection before counting, as ``store_instructions.py`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from arm_database import arm_database
from callgrind import ROOT, against_baseline, counted_run, instrument, report, require, seeded_environment
from store_instructions import store_run

WARMUP = 200


async def _child(runs: int, url: str, clients: int, counted: bool) -> None:
    # Imported here: the child's PYTHONPATH names the checkout it measures.
    from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head

    engine = create_engine(url)
    await upgrade_head(engine)
    store = HostStore(make_session_factory(engine))

    async def run(n: int) -> None:
        thread_id = await store_run(store, n)
        if await store.delete_thread(thread_id) is not True:
            raise SystemExit(f"store_deletes: thread {thread_id} was not deleted")

    async def runs_from(first: int, count: int) -> None:
        async def caller(k: int) -> None:
            for n in range(first + k, first + count, clients):
                await run(n)

        await asyncio.gather(*(caller(k) for k in range(clients)))

    await runs_from(0, WARMUP)
    gc.collect()
    if counted:
        instrument(os.getpid(), True)
    started = time.perf_counter()
    await runs_from(WARMUP, runs)
    elapsed = time.perf_counter() - started
    if counted:
        instrument(os.getpid(), False)
    print(f"{runs / elapsed:.1f}")
    await store.aclose()
    await engine.dispose()


def _child_argv(url: str, runs: int, clients: int, counted: bool) -> list[str]:
    argv = [sys.executable, __file__, "--child", url, "--runs", str(runs), "--clients", str(clients)]
    return [*argv, "--counted"] if counted else argv


def _count(tree: Path, runs: int, postgres: str | None, tmp: Path, name: str) -> float:
    env = seeded_environment(PYTHONPATH=str(tree / "src"))
    with arm_database(postgres, tmp, name) as url:
        argv = _child_argv(url, runs, 1, counted=True)
        return counted_run("store_deletes", name, tmp / f"{name}.out", argv, env) / runs


def _rate(tree: Path, runs: int, clients: int, postgres: str | None, tmp: Path, name: str) -> float:
    env = seeded_environment(PYTHONPATH=str(tree / "src"))
    with arm_database(postgres, tmp, name) as url:
        done = subprocess.run(_child_argv(url, runs, clients, counted=False), capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"store_deletes: {name} failed: {tail[0]}")
    return float(done.stdout.split()[-1])


def timed(runs: int, clients: int, rounds: int, postgres: str | None, baseline: str) -> None:
    trees = {"this checkout": ROOT, "baseline": Path(baseline).resolve()}
    where = "PostgreSQL" if postgres else "SQLite"
    print(f"python {sys.version.split()[0]}; {where}, {runs} stateless runs at {clients} clients; runs a second")
    ratios = []
    with tempfile.TemporaryDirectory() as name:
        for r in range(rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            rate = {
                arm: _rate(trees[arm], runs, clients, postgres, Path(name), f"arm{i}") for i, arm in enumerate(order)
            }
            ours, theirs = rate["this checkout"], rate["baseline"]
            ratios.append(ours / theirs)
            print(f"round {r}: this checkout {ours:.0f}, baseline {theirs:.0f}, {ratios[-1]:.3f}x")
    print(f"this checkout / baseline, median of {rounds} rounds: {statistics.median(ratios):.3f}x")


def main(runs: int, postgres: str | None, baseline: str | None) -> None:
    require("store_deletes")
    counts = against_baseline(lambda tree, tmp, name: _count(tree, runs, postgres, tmp, name), baseline)
    where = "PostgreSQL" if postgres else "SQLite"
    report(counts, f"{where}, {runs} stateless runs after {WARMUP} under callgrind")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="measured runs per arm")
    parser.add_argument("--postgres", help="a PostgreSQL server URL (postgresql://user@host:port/postgres)")
    parser.add_argument("--baseline", help="another checkout (`git archive` of the commit before) to measure alike")
    parser.add_argument("--timed", type=int, metavar="ROUNDS", help="runs a second, side by side, in ROUNDS rounds")
    parser.add_argument("--clients", type=int, default=8, help="concurrent callers of a timed arm")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.runs, args.child, args.clients, args.counted))
    elif args.timed:
        if not args.baseline:
            parser.error("--timed needs --baseline")
        timed(args.runs, args.clients, args.timed, args.postgres, args.baseline)
    else:
        main(args.runs, args.postgres, args.baseline)
