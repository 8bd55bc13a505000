"""PostgreSQL failing under concurrent runs, on a throwaway cluster of the test's own (the
machine's PostgreSQL on 5432 is never touched: other suites use it).

Three waves of concurrent runs, each in flight (sleeping in the model call) when its fault
lands: every Gateway connection terminated (``pg_terminate_backend``); the cluster stopped
and started again a few seconds later; the ``runs`` table locked past the database's
``statement_timeout`` (1 s, set for the Gateway's database before it starts), so statements
of the host hit the timeout.

Held after each wave: every run is terminal (``success`` or a clear error, never ``running``
for ever); no thread holds a duplicated message (ids unique, one human message per run);
``/health`` said ``degraded`` while the cluster was down and ``ok`` once it was back, and a
request that needs the database was answered 503 with ``Retry-After`` meanwhile; and the
pool recovered without a restart (new runs succeed, on the same process).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from chaos_support import (
    Gateway,
    all_final,
    figure,
    gateways,
    load_average,
    new_thread,
    parse_sse,
    run_rows,
    scaled,
    start_run,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

RUNS = scaled(24, 64)
# How long the cluster stays down. Past the thread lease (10 s) the process notices it lost
# its thread locks while the database is still away, so every run of the wave ends then and
# its outcome is saved only once the database is back (docs/RELIABILITY.md).
DOWN_SECONDS = float(os.environ.get("DEERFLOW_CHAOS_PG_DOWN_SECONDS", "2"))
STREAMS = 8
STATEMENT_TIMEOUT = "1s"


def _terminate_gateway_connections(admin_url: str, database: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)


def _wave(client: httpx.Client, label: str, seconds: float) -> list[tuple[str, str]]:
    runs = []
    for i in range(RUNS):
        thread_id = new_thread(client)
        runs.append((thread_id, start_run(client, thread_id, f"slow:{seconds} {label} {i}")))
    running = wait_for(
        lambda: sum(row.get("status") == "running" for row in run_rows(client, runs).values()) == RUNS, 60
    )
    assert running, f"{label}: the runs did not all start"
    return runs


def _messages_unique(client: httpx.Client, runs: list[tuple[str, str]]) -> int:
    """Checks every thread's stored messages; returns how many were read."""
    total = 0
    for thread_id, _ in runs:
        state = client.get(f"/api/threads/{thread_id}/state").json()
        messages = (state.get("values") or {}).get("messages") or []
        ids = [m.get("id") for m in messages]
        assert len(ids) == len(set(ids)), f"thread {thread_id}: duplicated message ids {ids}"
        humans = [m for m in messages if m.get("type") == "human"]
        assert len(humans) <= 1, f"thread {thread_id}: the prompt was stored {len(humans)} times"
        total += len(messages)
    return total


def _follow(url: str, thread_id: str, run_id: str, out: dict[str, object], joined: threading.Semaphore) -> None:
    """The event names of a run's stream; ``joined`` is released once the response began."""
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            with client.stream("GET", f"/api/threads/{thread_id}/runs/{run_id}/stream") as response:
                joined.release()
                text = response.read().decode()
            names = [name for name, _, _ in parse_sse(text)]
            out[run_id] = names or f"{response.status_code}: {text[-300:]}"
    except httpx.HTTPError as exc:
        out[run_id] = exc


def _health_watch(url: str, stop: threading.Event, seen: Counter[str]) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            try:
                seen[client.get("/health").json().get("status", "?")] += 1
            except (httpx.HTTPError, ValueError):
                seen["unanswered"] += 1
            time.sleep(0.2)


def test_postgres_faults_under_concurrent_runs(tmp_path: Path, own_postgres: Any) -> None:
    admin = own_postgres.url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE chaos")
        conn.execute(f"ALTER DATABASE chaos SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    write_config(tmp_path)
    statuses: Counter[str] = Counter()
    faults = 0
    health: Counter[str] = Counter()
    with gateways() as started:
        env = {"DEERFLOW_LOG_LEVEL": "WARNING", "DEERFLOW_SSE_HEARTBEAT_SECONDS": "0.5"}
        gw = Gateway(tmp_path, own_postgres.url("chaos"), env)
        started.append(gw.start())
        with gw.client() as client:
            # 1. every connection of the Gateway terminated mid-run
            runs = _wave(client, "terminate", 3)
            faults += _terminate_gateway_connections(admin, "chaos")
            rows = all_final(client, runs, 90)
            statuses.update(f"terminate:{row['status']}" for row in rows.values())
            checked = _messages_unique(client, runs)

            # 2. the cluster stopped, /health watched, started again; some runs' streams
            # followed meanwhile (their heartbeats ask the database whether the run ended)
            runs = _wave(client, "restart", 4)
            streams: dict[str, object] = {}
            joined = threading.Semaphore(0)
            readers = [
                threading.Thread(target=_follow, args=(gw.url, t, r, streams, joined), daemon=True)
                for t, r in runs[:STREAMS]
            ]
            for reader in readers:
                reader.start()
            for _ in readers:
                assert joined.acquire(timeout=30), "a stream did not begin"
            stop = threading.Event()
            watcher = threading.Thread(target=_health_watch, args=(gw.url, stop, health), daemon=True)
            watcher.start()
            own_postgres.stop("fast")
            faults += 1
            degraded = wait_for(lambda: health["degraded"] > 0, 30)
            refused = client.post("/api/threads", json={})  # a request the database must answer
            time.sleep(DOWN_SECONDS)
            own_postgres.start()
            recovered = wait_for(lambda: client.get("/health").json()["status"] == "ok", 60)
            stop.set()
            watcher.join(15)
            rows = all_final(client, runs, 120)
            statuses.update(f"restart:{row['status']}" for row in rows.values())
            for reader in readers:
                reader.join(60)
            checked += _messages_unique(client, runs)

            # 3. statements past statement_timeout: the runs table locked for 3 s mid-run
            runs = _wave(client, "timeout", 2)
            with psycopg.connect(own_postgres.url("chaos")) as locker:
                locker.execute("SET statement_timeout = 0")
                locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
                faults += 1
                time.sleep(3)
                locker.rollback()
            rows = all_final(client, runs, 120)
            statuses.update(f"timeout:{row['status']}" for row in rows.values())
            checked += _messages_unique(client, runs)

            # The pool recovered: new runs on the same process succeed.
            after = []
            for i in range(4):
                thread_id = new_thread(client)
                after.append((thread_id, start_run(client, thread_id, f"after {i}")))
            final_after = all_final(client, after, 60)
        assert gw.process is not None and gw.process.poll() is None, "the Gateway process died"

    assert degraded, f"/health never said degraded while PostgreSQL was down: {dict(health)}"
    cut = {r: s for r, s in streams.items() if not isinstance(s, list) or not s or s[-1] != "end"}
    assert not cut, f"streams cut or unended while PostgreSQL restarted: {list(cut.values())[:3]}"
    assert refused.status_code == 503 and "Retry-After" in refused.headers, refused.text
    assert "the database is unavailable" in refused.json()["detail"]
    assert recovered, "/health did not come back to ok once PostgreSQL was back"
    assert {row["status"] for row in final_after.values()} == {"success"}, final_after
    figure(
        "postgres_faults",
        runs=3 * RUNS,
        concurrent=RUNS,
        faults=faults,
        outcomes=dict(sorted(statuses.items())),
        health=dict(sorted(health.items())),
        messages_checked=checked,
        streams_followed=STREAMS,
        duplicated=0,
        left_running=0,
        lost=0,
        load=load_average(),
    )
