"""What a trivial run's writes to the host store cost on SQLite, counted in instructions.

Run: ``PYTHONPATH=src python benchmarks/store_instructions.py [--runs N] [--baseline DIR]``.
Needs valgrind (Debian's ``valgrind``); not a test. Prints the instructions per run of this
checkout's ``HostStore`` and, with ``--baseline``, of another checkout's, and their ratio.

Why: the store's part of a served run is a few percent of its CPU, and on a shared 2-core
VM the CPU a run costs spread by half within one arm in one run (measured in the twenty-first
pass): no timed benchmark there tells a 5% change from the noise. Callgrind counts the
instructions the process executes, which no load changes (the hash seed is fixed, a full
collection made before the measured runs, as ``run_instructions.py`` does).

A run's store work is what the Gateway asks of it for ``threads.create`` + ``runs.wait``:
the thread, the run with its thread's defaults, the run's start, its end with the thread's
status. Each arm is its own process on its own SQLite file, the migrations applied; the
first ``WARMUP`` runs are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from pathlib import Path
from typing import Any

from callgrind import against_baseline, counted_run, instrument, report, require, seeded_environment

WARMUP = 300


async def store_run(store: Any, n: int) -> str:
    """What the host store does for one run: its thread, its pending row, its start and end;
    the thread's id."""
    thread = await store.create_thread({"n": n})
    run_id = f"run-{n}"
    await store.create_run(thread.id, run_id, {"messages": []}, owner="bench", thread_defaults={"graph_id": "g"})
    await store.mark_started(run_id, thread.id)
    await store.finish_run(
        run_id, status="success", outcome="success", answer="hi", thread_id=thread.id, thread_status="idle"
    )
    return str(thread.id)


async def _child(runs: int, folder: str) -> None:
    # Imported here: the child's PYTHONPATH names the checkout it measures.
    from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head

    engine = create_engine(f"sqlite+aiosqlite:///{Path(folder) / 'store.db'}")
    await upgrade_head(engine)
    store = HostStore(make_session_factory(engine))

    async def run(n: int) -> None:
        await store_run(store, n)

    for n in range(WARMUP):
        await run(n)
    gc.collect()
    instrument(os.getpid(), True)
    for n in range(WARMUP, WARMUP + runs):
        await run(n)
    instrument(os.getpid(), False)
    await store.aclose()
    await engine.dispose()


def _count(tree: Path, runs: int, tmp: Path, name: str) -> float:
    folder = tmp / name
    folder.mkdir()
    child = [sys.executable, __file__, "--child", str(folder), "--runs", str(runs)]
    env = seeded_environment(PYTHONPATH=str(tree / "src"))
    return counted_run("store_instructions", name, tmp / f"{name}.out", child, env) / runs


def main(runs: int, baseline: str | None) -> None:
    require("store_instructions")
    counts = against_baseline(lambda tree, tmp, name: _count(tree, runs, tmp, name), baseline)
    report(counts, f"{runs} runs after {WARMUP} under callgrind")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="measured runs per arm")
    parser.add_argument("--baseline", help="another checkout (`git archive` of the commit before) to count alike")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.runs, args.child))
    else:
        main(args.runs, args.baseline)
