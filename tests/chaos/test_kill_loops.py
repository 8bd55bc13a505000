"""SIGKILL loops: a ``deerflow-ext serve`` killed at random moments under load, restarted on
the same database each time, on SQLite and on PostgreSQL.

Client threads keep creating runs (some quick, some sleeping in the model call) on a pool
of threads while the process is SIGKILLed at a random moment (seeded, printed); the process
is started again on the same database, and again, ``KILLS`` times.

Held: after every kill SQLite's ``PRAGMA integrity_check`` is ``ok``; after the last restart
every run the clients were told about is terminal — ``interrupted`` when it was in flight at
a kill — none ``pending``/``running``; and every thread is resumable: a new run on each
thread a kill interrupted succeeds.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from chaos_support import (
    Gateway,
    all_final,
    figure,
    gateways,
    load_average,
    new_thread,
    scaled,
    start_run,
    write_config,
)

from pg_support import PG_UNREACHABLE, fresh_database

pytestmark = pytest.mark.e2e

KILLS = scaled(5, 20)
CLIENTS = 4
SEED = 20261206


def _load(url: str, threads: list[str], runs: list[tuple[str, str]], stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            thread_id = rng.choice(threads)
            prompt = f"slow:{rng.choice([0, 0, 0.5, 2])} load"
            try:
                response = client.post(
                    f"/api/threads/{thread_id}/runs",
                    json={
                        "input": {"messages": [{"role": "user", "content": prompt}]},
                        "multitask_strategy": "enqueue",
                    },
                )
            except httpx.HTTPError:
                return  # the process is gone
            if response.status_code == 200:
                runs.append((thread_id, response.json()["run_id"]))
            time.sleep(0.02)


def _integrity(database: Path) -> str:
    with closing(sqlite3.connect(database)) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkill_loops_leave_every_run_terminal(tmp_path: Path, backend: str) -> None:
    write_config(tmp_path)
    database = tmp_path / "chaos.db"
    if backend == "postgres":
        if PG_UNREACHABLE:
            pytest.skip(PG_UNREACHABLE)
        pg = fresh_database("dfx_chaos")
        name = pg.__enter__()
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    else:
        url = f"sqlite+aiosqlite:///{database}"
    rng = random.Random(SEED)
    runs: list[tuple[str, str]] = []
    checks: Counter[str] = Counter()
    try:
        with gateways() as started:
            gw = Gateway(tmp_path, url, {"DEERFLOW_THREAD_LEASE_SECONDS": "2"})
            started.append(gw)
            gw.start()
            with gw.client() as client:
                threads = [new_thread(client) for _ in range(12)]
            for kill in range(KILLS):
                stop = threading.Event()
                clients = [
                    threading.Thread(target=_load, args=(gw.url, threads, runs, stop, SEED + kill * 10 + i))
                    for i in range(CLIENTS)
                ]
                for c in clients:
                    c.start()
                time.sleep(rng.uniform(0.3, 2.5))
                gw.kill()
                stop.set()
                for c in clients:
                    c.join(15)
                if backend == "sqlite":
                    checks[_integrity(database)] += 1
                gw.start()
            with gw.client() as client:
                rows = all_final(client, runs, 120)
                statuses = Counter(row["status"] for row in rows.values())
                interrupted = {thread_id for thread_id, run_id in runs if rows[run_id]["status"] == "interrupted"}
                resumed = []
                for thread_id in sorted(interrupted):
                    resumed.append((thread_id, start_run(client, thread_id, "after the kills")))
                after = all_final(client, resumed, 120)
            gw.stop()
        if backend == "sqlite":
            checks[_integrity(database)] += 1
    finally:
        if backend == "postgres":
            pg.__exit__(None, None, None)

    assert set(checks) <= {"ok"}, checks
    assert statuses["interrupted"] > 0, "no run was in flight at any kill: the case did not test it"
    assert {row["status"] for row in after.values()} <= {"success"}, after
    figure(
        f"kill_loops[{backend}]",
        kills=KILLS,
        seed=SEED,
        runs=len(runs),
        statuses=dict(sorted(statuses.items())),
        integrity_checks=sum(checks.values()) if backend == "sqlite" else "n/a",
        threads_resumed=len(after),
        left_running=0,
        lost=0,
        load=load_average(),
    )
