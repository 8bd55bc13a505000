"""A stateless run's thread goes (``on_completion: delete``) even when its process is killed.

Three stateless runs (``POST /api/runs``, the default ``delete``) and one with
``on_completion: keep`` are in flight — a middleware of ``stateful_ext`` sleeps on ``SLOW``
prompts — when the Gateway is SIGKILLed. Each run's row says its thread is temporary, so the
next start (startup recovery, after it interrupted the orphaned runs) deletes those three
threads with their runs and checkpoints; the ``keep`` thread stays, its run ``interrupted``.
Before, every such thread stayed forever (issue 54, row 11).
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


def _checkpointed(tmp_path: Path) -> set[str]:
    with closing(sqlite3.connect(_db(tmp_path))) as db:
        return {thread_id for (thread_id,) in db.execute("SELECT DISTINCT thread_id FROM checkpoints")}


def _running(client: httpx.Client, thread_id: str, run_id: str, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while client.get(f"/api/threads/{thread_id}/runs/{run_id}").json()["status"] != "running":
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)


def test_stateless_threads_a_killed_gateway_left_are_deleted_at_the_next_start(
    tmp_path: Path, gateway_processes: list[GatewayProcess]
) -> None:
    write_config(tmp_path / "config.yaml", [ENTRY])
    gw = start_gateway_process(tmp_path, tag="first")
    gateway_processes.append(gw)
    with httpx.Client(base_url=gw.url, timeout=20) as client:
        temporary = [client.post("/api/runs", json=run_body(f"SLOW {i}")).json() for i in range(3)]
        kept = client.post("/api/runs", json=run_body("SLOW kept", on_completion="keep")).json()
        for run in (*temporary, kept):
            _running(client, run["thread_id"], run["run_id"])
    # Killed once each run's first checkpoint is on disk (what must go with its thread).
    wait_for(lambda: {run["thread_id"] for run in temporary} <= _checkpointed(tmp_path), timeout=20)
    gw.kill()  # SIGKILL: no run ends, no thread is deleted

    with closing(sqlite3.connect(_db(tmp_path))) as db:
        assert db.execute("SELECT count(*) FROM threads").fetchone() == (4,)

    gw2 = start_gateway_process(tmp_path, tag="second")
    gateway_processes.append(gw2)
    with httpx.Client(base_url=gw2.url, timeout=20) as client:
        for run in temporary:
            assert client.get(f"/api/threads/{run['thread_id']}").status_code == 404, run
        assert client.get(f"/api/threads/{kept['thread_id']}").json()["status"] == "interrupted"
        row = client.get(f"/api/threads/{kept['thread_id']}/runs/{kept['run_id']}").json()
        assert row["status"] == "interrupted"
    assert "deleted 3 stateless run thread(s)" in gw2.output()
    assert _checkpointed(tmp_path).isdisjoint({run["thread_id"] for run in temporary})
    with closing(sqlite3.connect(_db(tmp_path))) as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (1,)
