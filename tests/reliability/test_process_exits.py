"""``KeyboardInterrupt`` / ``SystemExit`` from extension code is that extension's failure.

raised from a lifecycle hook, a middleware's model call, a system-model
observer (or any other contribution), either used to end the Gateway process within seconds
without its ordered shutdown. Now (``extensions/boundary/exits.py``): attributed, contained, the run
ends with an outcome and is persisted, the Gateway keeps serving and shuts down in order.

The Gateway runs on uvicorn in a *thread* here (``ThreadedServer``): should one of these
exceptions reach the event loop again, it ends that thread — which the test sees as a
Gateway that stopped serving — instead of the pytest process. The real-process half (a real
SIGINT/SIGTERM still shuts down in order, other extensions' buffers are flushed) is
``test_signals_still_shut_down_in_order`` at the end.
"""

from __future__ import annotations

import logging
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import faulty_ext
import httpx
import pytest

from conftest import (
    GatewayProcess,
    ThreadedServer,
    make_settings,
    parse_sse,
    run_body,
    start_gateway_process,
    write_config,
)

EXT = faulty_ext.ATTRIBUTION
NAMES = {"interrupt": "KeyboardInterrupt", "exit": "SystemExit: 7"}

# kind -> the prompt that reaches the fault (lifecycle hooks, contribute and assembly fault on
# every run; wrap and system only on prompts containing FAULT)
PROMPTS = {
    "lifecycle_start": "hello",
    "lifecycle_stop": "hello",
    "subagent_start": "delegate: a FAULT task",
    "subagent_stop": "delegate: a FAULT task",
    "wrap": "hello FAULT",
    "system": "hello FAULT",
    "assembly": "hello",
    "contribute": "hello",
    "compaction": "first FAULT",
    "service_start": "hello",
    "service_stop": "hello",
    "router": "hello",
}


def _app(tmp_path: Path, kind: str, mode: str) -> Any:
    from deerflow_ext.gateway import GatewayOptions, create_app

    sections: dict[str, Any] = {}
    if kind == "compaction":
        sections["summarization"] = {"enabled": True, "trigger_messages": 4, "keep_messages": 1}
    entry = {"name": "faulty", "use": "faulty_ext:install", "config": {"kind": kind, "mode": mode}}
    options = GatewayOptions(notify_budget=1.0, drain_grace=5.0, service_stop_timeout=2.0)
    return create_app(make_settings(tmp_path, [entry], **sections), options=options)


def _serving(server: ThreadedServer, client: httpx.Client) -> None:
    assert server.thread.is_alive(), "the Gateway's server thread ended: the exception reached the event loop"
    # Serving: 200, and "degraded" only names what failed to load or start (never an outage).
    health = client.get("/health", timeout=5)
    assert health.status_code == 200 and health.json()["status"] in ("ok", "degraded"), health.text


def _finished(client: httpx.Client, thread_id: str, run_id: str, within: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        row = client.get(f"/api/threads/{thread_id}/runs/{run_id}").json()
        if row["status"] not in ("pending", "running") or time.monotonic() > deadline:
            return dict(row)
        time.sleep(0.05)


def _fault_runs(client: httpx.Client, kind: str) -> list[dict[str, Any]]:
    thread_id = client.post("/api/threads", json={}).json()["thread_id"]
    prompts = ["first FAULT", "second FAULT", "third FAULT"] if kind == "compaction" else [PROMPTS[kind]]
    rows = []
    for prompt in prompts:
        response = client.post(f"/api/threads/{thread_id}/runs", json=run_body(prompt))
        assert response.status_code == 200, response.text
        rows.append(_finished(client, thread_id, response.json()["run_id"]))
    return rows


@pytest.mark.parametrize("mode", ["interrupt", "exit"])
@pytest.mark.parametrize("kind", list(PROMPTS))
def test_an_extension_cannot_stop_the_gateway(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, mode: str
) -> None:
    caplog.set_level(logging.INFO)
    faulty_ext.CALLS.clear()
    app = _app(tmp_path, kind, mode)
    server = ThreadedServer(app)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            _serving(server, client)
            rows = _fault_runs(client, kind)
            # Lifecycle hooks, observers and middleware fail open: the run completes.
            assert [(r["status"], r["outcome"]) for r in rows] == [("success", "completed")] * len(rows), rows
            if kind == "router":
                response = client.get("/faulty/boom")
                assert response.status_code == 500
                assert response.json() == {"detail": f"internal error: {NAMES[mode].split(':')[0]}"}
            _serving(server, client)
            thread_id = client.post("/api/threads", json={}).json()["thread_id"]
            events = parse_sse(client.post(f"/api/threads/{thread_id}/runs/stream", json=run_body("clean")).text)
            assert events[-1][0] == "end" and events[-1][1]["status"] == "success", events[-3:]
    finally:
        server.close()
    assert not server.thread.is_alive(), "shutdown did not finish"
    reached = {k for k, _ in faulty_ext.CALLS}
    assert kind in reached, f"the fault in {kind} was never reached: {faulty_ext.CALLS}"
    # The ordered shutdown ran: services are stopped after the run drain, a service whose
    # start failed included (every attempted start is stopped, as in DeerFlow).
    assert ("service_stop", "faulty") in faulty_ext.CALLS
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"Extension {EXT}:")]
    assert any(NAMES[mode] in line for line in lines), caplog.text[-3000:]


# -- a real process, real signals ----------------------------------------------------------

BUFFERED = {"name": "buffered", "use": "buffered_ext:install", "table_prefix": "bufx_"}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signals_still_shut_down_in_order(
    tmp_path: Path, gateway_processes: list[GatewayProcess], sig: signal.Signals
) -> None:
    faults = [
        {"name": f"faulty-{kind}", "use": "faulty_ext:install", "config": {"kind": kind, "mode": mode}}
        for kind, mode in (("lifecycle_start", "exit"), ("wrap", "interrupt"), ("system", "exit"))
    ]
    write_config(tmp_path / "config.yaml", [BUFFERED, *faults])
    gw = start_gateway_process(tmp_path)
    gateway_processes.append(gw)
    runs = []
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        for i in range(3):
            thread_id = client.post("/api/threads", json={}).json()["thread_id"]
            run_id = client.post(f"/api/threads/{thread_id}/runs", json=run_body(f"run {i} FAULT")).json()["run_id"]
            runs.append(run_id)
            row = _finished(client, thread_id, run_id)
            assert (row["status"], row["outcome"]) == ("success", "completed"), row
        assert gw.proc.poll() is None, gw.output()[-3000:]
        assert client.get("/health").json() == {"status": "ok"}
    log = gw.output()
    assert f"Extension {EXT}: on_task_start raised SystemExit: 7" in log, log[-3000:]
    assert "KeyboardInterrupt" in log and "FaultyMiddleware.awrap_model_call" in log, log[-3000:]
    gw.proc.send_signal(sig)
    code = gw.proc.wait(30)
    # README's exit codes: Ctrl-C is 130 (an interrupted command), SIGTERM a clean stop.
    assert code in ((130,) if sig == signal.SIGINT else (0, -sig)), gw.output()[-3000:]
    assert "Application shutdown complete" in gw.output()
    with sqlite3.connect(tmp_path / "deer-flow" / "deerflow.db") as db:
        flushed = {run_id for (run_id,) in db.execute("SELECT run_id FROM bufx_rows")}
    assert flushed == set(runs), "the buffered extension was not flushed by the ordered shutdown"
