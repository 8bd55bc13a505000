"""PostgreSQL against SQLite at equal durability: runs/s of the Gateway in two pairs.

Run: ``PYTHONPATH=src python benchmarks/durability_pairs.py [--clients 8 32] [--rounds 3]``
(needs PostgreSQL; ``--pg-admin`` names a database to create the arms' own from). Not a
test: prints figures and the ratios of arms measured alternately in one run.

A comparison of two databases' speed means something only when both promise the same after
a crash (``persistence/durability.py``). Each pair sets ``DEERFLOW_DATABASE_DURABILITY`` on
both of its servers:

- ``full``: SQLite ``synchronous=FULL`` against PostgreSQL ``synchronous_commit=on`` (no
  committed run lost to any crash);
- ``relaxed``: SQLite ``NORMAL`` against PostgreSQL ``off`` (an OS or database-server crash
  may lose the last commits).

Each arm is ``deerflow-ext serve`` (title and memory off, the embedded offline model: the
database's share of a run is what differs) on a database of its own, SQLite in a temp
directory, PostgreSQL a fresh database dropped after. The client is ``gateway.py``'s: per
run ``POST /api/threads`` then ``POST .../runs/stream`` read to its ``end``, ``--clients``
at once; the four arms run in alternating order ``--rounds`` times at each client count.
Printed: runs/s (median over rounds) and p50 per arm, and per pair PostgreSQL/SQLite with
the range of the per-round ratios (the target: >= 0.9x at 8 and at 32 clients in both).
``--pin`` (default CPU 0) puts the servers there and the clients on the others;
PostgreSQL's own processes stay where the operating system puts them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from peer_langgraph import Server, _load, parse_cpus, pin_clients, placement, start_ours

from gateway import _pct, http_arm

PAIRS = ("full", "relaxed")
WAVES = 8
"""Runs per client in a round, at least (as ``peer_langgraph.py``: the ramp stays a small part)."""


@contextmanager
def fresh_databases(admin: str, count: int) -> Iterator[list[str]]:
    """``count`` new PostgreSQL databases (asyncpg URLs), dropped after."""
    names = [f"dfx_pairs_{uuid.uuid4().hex[:10]}" for _ in range(count)]
    base = admin.rpartition("/")[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield [f"{base}/{name}" for name in names]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _base(server: Server) -> str:
    return server.url.removesuffix("/api")


async def run(args: argparse.Namespace, servers: list[Server]) -> None:
    for server in servers:
        await http_arm(_base(server), 16, 4)  # warm-up: imports, compilation, pools
    print(f"{'clients':>7} {'arm':<20}{'runs/s':>9}{'p50 ms':>9}   PostgreSQL/SQLite (by round)")
    by_name = {s.name: s for s in servers}
    for clients in args.clients:
        total = max(args.runs, clients * WAVES)
        for index in range(args.rounds):
            for server in servers if index % 2 == 0 else list(reversed(servers)):
                rate, latencies = await http_arm(_base(server), total, clients)
                server.rates.setdefault(clients, []).append(rate)
                server.latencies.setdefault(clients, []).extend(latencies)
        for server in servers:
            rate = statistics.median(server.rates[clients])
            line = f"{clients:>7} {server.name:<20}{rate:>9.1f}{_pct(server.latencies[clients], 0.5) * 1e3:>9.1f}"
            database, _, pair = server.name.partition(":")
            if database == "postgresql":
                sqlite = by_name[f"sqlite:{pair}"]
                ratios = [p / s for p, s in zip(server.rates[clients], sqlite.rates[clients], strict=True)]
                ratio = rate / statistics.median(sqlite.rates[clients])
                verdict = "met" if ratio >= 0.9 else "missed"
                line += f"   {ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) target >= 0.9x: {verdict}"
            print(line, flush=True)
        rounds = ", ".join(f"{s.name} " + "/".join(f"{r:.1f}" for r in s.rates[clients]) for s in servers)
        print(f"        per round: {rounds}; load {_load()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--runs", type=int, default=128, help=f"runs per arm per round (at least {WAVES}x the clients)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client count")
    parser.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--pin", type=parse_cpus, default=parse_cpus("0"), help="the servers' CPUs (default 0)")
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; load {_load()}; max({args.runs}, {WAVES} x "
        f"clients) runs x {args.rounds} rounds per arm; servers on CPUs {placement(args.pin)}; PostgreSQL floating"
    )
    pin_clients(args.pin)
    servers: list[Server] = []
    try:
        databases = fresh_databases(args.pg_admin, len(PAIRS))
        with tempfile.TemporaryDirectory(prefix="dfx-pairs-") as name, databases as pg_urls:
            tmp = Path(name)
            try:
                for pair, pg_url in zip(PAIRS, pg_urls, strict=True):
                    for database, url in (("sqlite", None), ("postgresql", pg_url)):
                        arm = f"{database}:{pair}"
                        server = start_ours(
                            tmp,
                            arm.replace(":", "-"),
                            defaults=False,
                            io=False,
                            database_url=url,
                            workers=1,
                            python=sys.executable,
                            cpus=args.pin,
                            extra_env={"DEERFLOW_DATABASE_DURABILITY": pair},
                        )
                        server.name = arm
                        servers.append(server)
                asyncio.run(run(args, servers))
            finally:
                for server in servers:
                    server.stop()
    except psycopg.OperationalError as exc:
        raise SystemExit(f"durability_pairs: PostgreSQL at {args.pg_admin} did not answer: {exc}") from None


if __name__ == "__main__":
    main()
