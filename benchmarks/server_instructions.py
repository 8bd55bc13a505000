"""What a served trivial run costs the Gateway's process, counted in instructions.

Run: ``PYTHONPATH=src python benchmarks/server_instructions.py [--runs N] [--clients N]
[--postgres URL] [--baseline DIR | --auth]``. Needs valgrind (Debian's ``valgrind``); not a test. Prints the
instructions per run of ``deerflow-ext serve`` from this checkout and, with ``--baseline``,
from another, and their ratio; with ``--auth``, of this checkout serving ``bench_auth.py``'s
handlers (``auth:``) against serving none.

Why: on a shared 2-core VM the CPU a served run costs spread by half within one arm in one
run, so ``cpu_per_run.py`` cannot tell a 2% change from the
noise, and most of what is left to take out of a run is in pieces of 1-2%. Callgrind counts
the instructions the whole process executes (every thread), which no load changes.

Each arm is ``deerflow-ext serve`` as ``peer_langgraph.py`` starts it (title and memory off,
the embedded model, SQLite or, with ``--postgres``, a PostgreSQL database of its own) under
callgrind with counting off. ``WARMUP`` runs first, then
counting goes on for ``--runs`` runs (``threads.create`` + ``runs.wait`` by ``langgraph_sdk``
at ``--clients``) and off again. The hash seed is fixed. What is not fixed is what the
process does by the clock (the WAL's checkpoint thread once a second, timers): under
callgrind a run takes ~50 times as long, so that work is counted per second of a slowed run
in both arms alike; one tree counted within ±0.2% over six runs of 100.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from arm_database import arm_database
from callgrind import ROOT, against_baseline, command, instrument, report, require, seeded_environment, totals
from peer_langgraph import measure, start_ours  # the sibling scripts

WARMUP = 30


AUTH_LINES = ("auth:", f"  path: {Path(__file__).resolve().parent / 'bench_auth.py'}:auth")
"""``--auth``: the config lines of the arm with users (``bench_auth.py``'s handlers)."""


def _count(
    tree: Path, runs: int, clients: int, postgres: str | None, tmp: Path, name: str, config: tuple[str, ...] = ()
) -> float:
    with arm_database(postgres, tmp, name) as url:
        return _count_on(tree, runs, clients, url, tmp, name, config)


def _count_on(
    tree: Path, runs: int, clients: int, url: str, tmp: Path, name: str, config: tuple[str, ...] = ()
) -> float:
    out = tmp / f"{name}.out"
    (tmp / name).mkdir()
    os.environ.update(seeded_environment())  # start_ours hands this environment on
    server = start_ours(
        tmp / name,
        "ours",
        defaults=False,
        io=False,
        database_url=url,
        workers=1,
        python=sys.executable,
        tree=tree,
        prefix=command(out),
        ready_timeout=900,  # startup under callgrind: about a minute here
        config_lines=config,
    )
    try:
        asyncio.run(measure(server, WARMUP, clients))
        instrument(server.proc.pid, True)
        asyncio.run(measure(server, runs, clients))
        instrument(server.proc.pid, False)
    finally:
        server.stop()
    counted = totals(out)
    if counted is None:
        raise SystemExit(f"server_instructions: {name} wrote no totals; its log: {server.log}")
    return counted / runs


def main(runs: int, clients: int, postgres: str | None, baseline: str | None, auth: bool = False) -> None:
    require("server_instructions")
    if auth:  # this checkout with and without users: what the handlers cost a served run
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            plain = _count(ROOT, runs, clients, postgres, tmp, "plain")
            users = _count(ROOT, runs, clients, postgres, tmp, "users", AUTH_LINES)
        print(f"no auth {plain:>14,.0f}\nauth    {users:>14,.0f}\nauth / no auth: {users / plain:.3f}x")
        return
    counts = against_baseline(lambda tree, tmp, name: _count(tree, runs, clients, postgres, tmp, name), baseline)
    where = "PostgreSQL" if postgres else "SQLite"
    report(counts, f"{where}, {runs} runs at {clients} clients after {WARMUP}, under callgrind")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="counted runs per arm")
    parser.add_argument("--clients", type=int, default=1, help="concurrent clients")
    parser.add_argument("--postgres", help="a PostgreSQL server URL (postgresql://user@host:port/postgres)")
    parser.add_argument("--baseline", help="another checkout (`git archive` of the commit before) to count alike")
    parser.add_argument(
        "--auth", action="store_true", help="this checkout with bench_auth.py's handlers against without"
    )
    args = parser.parse_args()
    main(args.runs, args.clients, args.postgres, args.baseline, args.auth)
