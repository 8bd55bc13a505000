"""Soak: hostile extensions loaded next to the four examples, in a real ``deerflow-ext serve``.

the Gateway serves throughout and every run is persisted. Next to the
examples (observers, audit — required, costs, otel) the process loads extensions that
``sys.exit()`` and raise ``KeyboardInterrupt`` from lifecycle hooks, a middleware, a
system-model observer, an assembly observer, a subagent's hooks and a route; raise and
cancel themselves; fail at import and half-way through ``install()``; try to shadow host
routes; and leave a non-daemon thread running. Client threads drive streamed and
background runs, delegations, follow-ups that interrupt, cancels right after creation and
the extensions' routes, while another thread polls ``/health``.

Checked: ``/health`` never fails; the process never exits; once the clients stop, no run is
left ``pending``/``running``; every run that started has its audit row (the audit example
buffers outcomes and writes them from its service, the last at shutdown); SIGINT ends the
process within the shutdown bound, in order. Bounded by default (``DEERFLOW_SOAK_RUNS``,
default 200, scales it).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import HERE, GatewayProcess, parse_sse, run_body, start_gateway_process, write_config

pytestmark = pytest.mark.soak

RUNS = int(os.environ.get("DEERFLOW_SOAK_RUNS", "200"))
WORKERS = 4
EXAMPLES = HERE.parents[1] / "plugins_examples"
EXAMPLE_PATHS = [str(EXAMPLES / name / "src") for name in ("observers", "audit", "costs", "otel")]


def _faulty(kind: str, mode: str) -> dict[str, Any]:
    return {"name": f"faulty-{kind}-{mode}", "use": "faulty_ext:install", "config": {"kind": kind, "mode": mode}}


PLUGINS: list[dict[str, Any]] = [
    {"name": "observers", "use": "deerflow_observers:install"},
    {"name": "audit", "use": "deerflow_audit:install", "required": True, "table_prefix": "audit_"},
    {"name": "costs", "use": "deerflow_costs:install"},
    {"name": "otel", "use": "deerflow_otel:install", "config": {"exporter": "memory"}},
    _faulty("lifecycle_start", "exit"),
    _faulty("lifecycle_stop", "interrupt"),
    _faulty("wrap", "exit"),
    _faulty("wrap", "raise"),
    _faulty("system", "interrupt"),
    _faulty("assembly", "exit"),
    _faulty("subagent_start", "interrupt"),
    _faulty("contribute", "cancel"),
    _faulty("router", "exit"),
    _faulty("install_halfway", "exit"),
    {"name": "import-exit", "use": "faulty_import_exit:install"},
    {"name": "shadow", "use": "security_ext:install_shadow"},
    {"name": "threads", "use": "blocking_ext:install", "config": {"where": "thread"}},
]


class Workload:
    """What the clients did: every run id, and every request that was not answered."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.runs: list[tuple[str, str]] = []
        self.unanswered: list[str] = []
        self._lock = threading.Lock()

    def note_run(self, thread_id: str, run_id: str) -> None:
        with self._lock:
            self.runs.append((thread_id, run_id))

    def request(self, client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        try:
            response = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            with self._lock:
                self.unanswered.append(f"{method} {path}: {type(exc).__name__}: {exc}")
            return None
        if response.status_code >= 500 and not path.startswith("/faulty/"):
            with self._lock:
                self.unanswered.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
        return response

    def thread(self, client: httpx.Client) -> str:
        response = self.request(client, "POST", "/api/threads", json={})
        assert response is not None and response.status_code == 200
        return str(response.json()["thread_id"])

    def stream(self, client: httpx.Client, thread_id: str, prompt: str) -> None:
        response = self.request(client, "POST", f"/api/threads/{thread_id}/runs/stream", json=run_body(prompt))
        if response is not None and response.status_code == 200:
            events = parse_sse(response.text)
            self.note_run(thread_id, events[0][1]["run_id"])
            assert events[-1][0] == "end", events[-3:]

    def background(self, client: httpx.Client, thread_id: str, prompt: str) -> str | None:
        response = self.request(client, "POST", f"/api/threads/{thread_id}/runs", json=run_body(prompt))
        if response is None or response.status_code != 200:
            return None
        run_id = str(response.json()["run_id"])
        self.note_run(thread_id, run_id)
        return run_id


def _actions(w: Workload) -> list[Callable[[httpx.Client, int], None]]:
    def streamed(c: httpx.Client, i: int) -> None:
        w.stream(c, w.thread(c), f"hello FAULT {i}")

    def delegated(c: httpx.Client, i: int) -> None:
        w.stream(c, w.thread(c), f"delegate: look up FAULT {i}")

    def follow_up(c: httpx.Client, i: int) -> None:
        thread_id = w.thread(c)
        w.background(c, thread_id, f"first {i}")
        w.stream(c, thread_id, f"follow-up {i}")

    def cancelled(c: httpx.Client, i: int) -> None:
        thread_id = w.thread(c)
        run_id = w.background(c, thread_id, f"cancel me {i}")
        if run_id is not None:
            w.request(c, "POST", f"/api/threads/{thread_id}/runs/{run_id}/cancel")

    def routes(c: httpx.Client, i: int) -> None:
        w.background(c, w.thread(c), f"background {i}")
        for path in ("/faulty/boom", "/faulty/ok", "/api/ext/audit/outcomes", "/api/ext/costs/totals"):
            w.request(c, "GET", path)

    return [streamed, delegated, follow_up, cancelled, routes]


def _drive(w: Workload, worker: int, count: int) -> None:
    actions = _actions(w)
    with httpx.Client(base_url=w.url, timeout=60) as client:
        for i in range(count):
            actions[(worker + i) % len(actions)](client, worker * 10_000 + i)


def _health(w: Workload, stop: threading.Event, gw: GatewayProcess, latencies: list[float]) -> None:
    with httpx.Client(base_url=w.url, timeout=30) as client:
        while not stop.is_set():
            started = time.monotonic()
            response = w.request(client, "GET", "/health")
            latencies.append(time.monotonic() - started)
            if response is not None and response.json().get("status") not in ("ok", "degraded"):
                w.unanswered.append(f"/health answered {response.text}")
            if gw.proc.poll() is not None:
                w.unanswered.append(f"the Gateway exited with {gw.proc.returncode}")
                return
            time.sleep(0.1)


def _settled(w: Workload, within: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within
    with httpx.Client(base_url=w.url, timeout=30) as client:
        while True:
            rows = [client.get(f"/api/threads/{t}/runs/{r}").json() for t, r in w.runs]
            live = [row for row in rows if row["status"] in ("pending", "running")]
            if not live or time.monotonic() > deadline:
                assert not live, f"{len(live)} run(s) never ended: {live[:3]}"
                return rows
            time.sleep(0.2)


def test_hostile_extensions_next_to_the_examples(tmp_path: Path, gateway_processes: list[GatewayProcess]) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel example exports through the OpenTelemetry SDK")
    write_config(tmp_path / "config.yaml", PLUGINS)
    gw = start_gateway_process(tmp_path, extra_path=EXAMPLE_PATHS)
    gateway_processes.append(gw)
    startup = gw.output()
    assert "Extensions loaded: 15/17" in startup, startup[-3000:]

    w = Workload(gw.url)
    stop, latencies = threading.Event(), []
    poller = threading.Thread(target=_health, args=(w, stop, gw, latencies), daemon=True)
    poller.start()
    started = time.monotonic()
    try:
        per_worker = max(1, RUNS // WORKERS)
        with ThreadPoolExecutor(WORKERS) as pool:
            for future in [pool.submit(_drive, w, n, per_worker) for n in range(WORKERS)]:
                future.result()
        rows = _settled(w)
    finally:
        stop.set()
        poller.join(30)
    soak_seconds = time.monotonic() - started
    assert w.unanswered == [], w.unanswered[:10]
    assert gw.proc.poll() is None, gw.output()[-3000:]
    assert len(rows) >= RUNS, len(rows)
    statuses = {row["status"] for row in rows}
    assert statuses <= {"success", "interrupted", "error"}, statuses
    started_runs = {row["run_id"] for row in rows if row["started_at"] is not None}

    gw.proc.send_signal(signal.SIGINT)
    try:
        code = gw.proc.wait(60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the Gateway did not exit within 60s of SIGINT:\n{gw.output()[-3000:]}")
    log = gw.output()
    assert code == 0, log[-3000:]
    assert "Application shutdown complete" in log
    # The hostility was real: each of these ended a Gateway before the hardening.
    for line in (
        "Extension faulty_ext:install: on_task_start raised SystemExit: 7",
        "Extension faulty_ext:install: on_task_stop raised KeyboardInterrupt",
        "Extension faulty_ext:install: on_system_model_call raised KeyboardInterrupt",
        "Extension faulty_ext:install: FaultyMiddleware.awrap_model_call raised SystemExit: 7",
        "Extension faulty_ext:install: on_agent_assembled raised SystemExit: 7",
        "Extension faulty_import_exit:install: cannot import faulty_import_exit:install: SystemExit: 7",
        "1 thread(s) still running after shutdown",
    ):
        assert line in log, line
    with sqlite3.connect(tmp_path / "deer-flow" / "deerflow.db") as db:
        audited = {run_id for (run_id,) in db.execute("SELECT run_id FROM audit_task_outcomes WHERE kind = 'lead'")}
        leftover = db.execute("SELECT count(*) FROM runs WHERE status IN ('pending', 'running')").fetchone()
    assert leftover == (0,)
    assert started_runs <= audited, f"{len(started_runs - audited)} started run(s) have no audit row"
    print(
        f"\nsoak: {len(rows)} runs in {soak_seconds:.1f}s, {len(latencies)} health checks, "
        f"worst /health {max(latencies):.2f}s, statuses {sorted(statuses)}"
    )
