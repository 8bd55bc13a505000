"""Crash safety: SIGKILL a Gateway process mid-run, restart it on the same SQLite file.

Five slow runs are in flight (a middleware of ``stateful_ext`` sleeps on ``SLOW`` prompts)
when the process is killed without any chance to clean up. On restart: SQLite's integrity
check passes, every interrupted run is ``interrupted``/``aborted`` and its thread
``interrupted`` (none left ``running``), a run that finished before the kill keeps its
outcome, the extension's ``relx_`` table is intact with the rows written before the kill,
and the Gateway serves new runs on the same threads.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import httpx

from conftest import GatewayProcess, run_body, start_gateway_process, write_config
from deerflow_ext.testing import wait_for

ENTRY = {"name": "stateful", "use": "stateful_ext:install", "table_prefix": "relx_", "config": {"table": True}}


def _db(tmp_path: Path) -> Path:
    return tmp_path / "deer-flow" / "deerflow.db"


def _events(tmp_path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(_db(tmp_path))) as db:
        return db.execute("SELECT run_id, what FROM relx_events ORDER BY id").fetchall()


def _wait_status(client: httpx.Client, thread_id: str, run_id: str, want: set[str], within: float = 15) -> dict:
    deadline = time.monotonic() + within
    while True:
        row = client.get(f"/api/threads/{thread_id}/runs/{run_id}").json()
        if row["status"] in want or time.monotonic() > deadline:
            return dict(row)
        time.sleep(0.05)


def test_sigkill_mid_run_then_restart(tmp_path: Path, gateway_processes: list[GatewayProcess]) -> None:
    write_config(tmp_path / "config.yaml", [ENTRY])
    gw = start_gateway_process(tmp_path, tag="first")
    gateway_processes.append(gw)
    with httpx.Client(base_url=gw.url, timeout=20) as client:
        done_thread = client.post("/api/threads", json={}).json()["thread_id"]
        done = client.post(f"/api/threads/{done_thread}/runs", json=run_body("quick")).json()["run_id"]
        assert _wait_status(client, done_thread, done, {"success"})["status"] == "success"
        slow = []
        for i in range(5):
            thread_id = client.post("/api/threads", json={}).json()["thread_id"]
            run_id = client.post(f"/api/threads/{thread_id}/runs", json=run_body(f"SLOW {i}")).json()["run_id"]
            slow.append((thread_id, run_id))
        for thread_id, run_id in slow:
            assert _wait_status(client, thread_id, run_id, {"running"})["status"] == "running"
        # Killed only once every slow run's start event is committed (what is checked below).
        wait_for(lambda: {(r, "start") for _, r in slow} <= set(_events(tmp_path)), timeout=15)
    gw.kill()  # SIGKILL: no shutdown, no on_task_stop, no finish_run

    with sqlite3.connect(_db(tmp_path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        statuses = dict(db.execute("SELECT id, status FROM runs").fetchall())
        assert {statuses[r] for _, r in slow} == {"running"}
        events_before = _events(tmp_path)
    assert ("done", "start") not in events_before
    assert {(r, "start") for _, r in slow} <= set(events_before)

    gw2 = start_gateway_process(tmp_path, tag="second")
    gateway_processes.append(gw2)
    with httpx.Client(base_url=gw2.url, timeout=20) as client:
        for thread_id, run_id in slow:
            row = client.get(f"/api/threads/{thread_id}/runs/{run_id}").json()
            assert (row["status"], row["outcome"]) == ("interrupted", "aborted"), row
            assert client.get(f"/api/threads/{thread_id}").json()["status"] == "interrupted"
        row = client.get(f"/api/threads/{done_thread}/runs/{done}").json()
        assert (row["status"], row["outcome"]) == ("success", "completed")
        # Serving again, on a thread the crash interrupted.
        thread_id = slow[0][0]
        run_id = client.post(f"/api/threads/{thread_id}/runs", json=run_body("after the crash")).json()["run_id"]
        assert _wait_status(client, thread_id, run_id, {"success", "error", "interrupted"})["status"] == "success"
    gw2.proc.terminate()  # graceful this time: the run's on_task_stop (after its row is final) completes
    assert gw2.proc.wait(30) in (0, -15), gw2.output()[-2000:]  # uvicorn re-raises SIGTERM after shutdown
    assert "Application shutdown complete" in gw2.output()

    with sqlite3.connect(_db(tmp_path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM runs WHERE status IN ('pending', 'running')").fetchone() == (0,)
        events_after = _events(tmp_path)
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert events_after[: len(events_before)] == events_before  # nothing lost or rewritten
    assert (run_id, "start") in events_after and (run_id, "stop") in events_after
    assert {"runs", "threads", "relx_events"} <= tables
