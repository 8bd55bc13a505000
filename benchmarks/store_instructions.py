"""What a trivial run's writes to the host store cost on SQLite, counted in instructions.

Run: ``PYTHONPATH=src python benchmarks/store_instructions.py [--runs N] [--baseline DIR]``.
Needs valgrind (Debian's ``valgrind``); not a test. Prints the instructions per run of this
checkout's ``HostStore`` and, with ``--baseline``, of another checkout's, and their ratio.

Why: the store's part of a served run is a few percent of its CPU, and on a shared 2-core
VM the CPU a run costs spread by half within one arm in one run (issue 16, twenty-first
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
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WARMUP = 300
ROOT = Path(__file__).resolve().parent.parent


def _instrument(on: bool) -> None:
    switch = "on" if on else "off"
    subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True)


async def _child(runs: int, folder: str) -> None:
    # Imported here: the child's PYTHONPATH names the checkout it measures.
    from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head

    engine = create_engine(f"sqlite+aiosqlite:///{Path(folder) / 'store.db'}")
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

    for n in range(WARMUP):
        await run(n)
    gc.collect()
    _instrument(True)
    for n in range(WARMUP, WARMUP + runs):
        await run(n)
    _instrument(False)
    await store.aclose()
    await engine.dispose()


def _count(tree: Path, runs: int, tmp: Path, name: str) -> float:
    out = tmp / f"{name}.out"
    folder = tmp / name
    folder.mkdir()
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    command += [sys.executable, __file__, "--child", str(folder), "--runs", str(runs)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    totals = re.search(r"^totals: (\d+)", out.read_text() if out.exists() else "", re.MULTILINE)
    if done.returncode != 0 or totals is None:
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"store_instructions: {name} failed under callgrind: {tail[0]}")
    return int(totals.group(1)) / runs


def main(runs: int, baseline: str | None) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("store_instructions: valgrind is not installed (apt-get install valgrind)")
    trees = {"this checkout": ROOT}
    if baseline:
        trees["baseline"] = Path(baseline).resolve()
    with tempfile.TemporaryDirectory() as name:
        counts = {arm: _count(tree, runs, Path(name), f"arm{i}") for i, (arm, tree) in enumerate(trees.items())}
    print(f"python {sys.version.split()[0]}; {runs} runs after {WARMUP} under callgrind; instructions per run")
    for arm, count in counts.items():
        print(f"{arm:<16}{count:>14,.0f}")
    if "baseline" in counts:
        print(f"this checkout / baseline: {counts['this checkout'] / counts['baseline']:.3f}x")


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
