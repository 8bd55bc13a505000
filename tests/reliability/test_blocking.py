"""Extensions that block the event loop or leave threads behind.

Nothing in asyncio can interrupt a hook that blocks the loop, so every request waits behind
it. What the Gateway owes the operator: the log names the extension and hook while the loop
is blocked and says for how long once it is free (``extensions/boundary/loopwatch.py``); a service
whose ``start``/``stop`` blocks is ended at its timeout in a served process, so shutdown
still stops the other services (and they flush what they buffered); and a served process
exits within the shutdown bound even when an extension left a non-daemon thread running
(``gateway/exit_bound.py``).
"""

from __future__ import annotations

import logging
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    SRC,
    GatewayProcess,
    ThreadedServer,
    make_settings,
    run_body,
    start_gateway_process,
    subprocess_env,
    write_config,
)

EXT = "blocking_ext:install"
BUFFERED = {"name": "buffered", "use": "buffered_ext:install", "table_prefix": "bufx_"}


def _entry(where: str, seconds: float) -> dict[str, Any]:
    return {"name": "blocking", "use": EXT, "config": {"where": where, "seconds": seconds}}


def _poll_health(url: str, stop: threading.Event, worst: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            started = time.monotonic()
            client.get("/health")
            worst.append(time.monotonic() - started)
            time.sleep(0.05)


@pytest.mark.parametrize(
    ("where", "hook"),
    [("on_task_start", "on_task_start (task "), ("wrap", "SleepyMiddleware.awrap_model_call")],
)
def test_a_hook_blocking_the_loop_is_named_while_it_blocks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str, hook: str
) -> None:
    from deerflow_ext.gateway import create_app

    caplog.set_level(logging.INFO)
    server = ThreadedServer(create_app(make_settings(tmp_path, [_entry(where, 2.5)])))
    stop, worst = threading.Event(), []
    poller = threading.Thread(target=_poll_health, args=(server.url, stop, worst), daemon=True)
    try:
        poller.start()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            thread_id = client.post("/api/threads", json={}).json()["thread_id"]
            response = client.post(f"/api/threads/{thread_id}/runs/stream", json=run_body("hello"))
            assert response.status_code == 200
    finally:
        stop.set()
        poller.join(30)
        server.close()
    assert max(worst) >= 1.0, worst  # the loop really was blocked: what the log must explain
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"Extension {EXT}: {hook}")]
    assert any("is blocking the event loop" in line and "every request waits" in line for line in lines), lines
    ended = [line for line in lines if " blocked the event loop for " in line]
    assert ended, [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()]
    seconds = float(ended[0].rsplit(" ", 1)[1].rstrip("s"))
    assert 2.0 <= seconds < 30, ended


def test_a_blocking_service_start_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from deerflow_ext.gateway import create_app

    caplog.set_level(logging.INFO)
    server = ThreadedServer(create_app(make_settings(tmp_path, [_entry("service_start", 1.6)])))
    server.close()
    assert f"Extension {EXT}: service start is blocking the event loop" in caplog.text, caplog.text[-2000:]
    assert f"Extension {EXT}: service start blocked the event loop for " in caplog.text


def _stop(gw: GatewayProcess, within: float) -> float:
    started = time.monotonic()
    gw.proc.send_signal(signal.SIGINT)
    try:
        gw.proc.wait(within)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the Gateway did not exit within {within}s of SIGINT:\n{gw.output()[-3000:]}")
    return time.monotonic() - started


def _run_then_sigint(tmp_path: Path, procs: list[GatewayProcess], entry: dict[str, Any], within: float) -> str:
    """Serve [buffered, entry], one run, SIGINT; checks the buffered row was flushed; the log.

    ``entry`` comes after the buffered extension, so its service stops first: whatever it
    holds up stands between the buffered row and the database.
    """
    write_config(tmp_path / "config.yaml", [BUFFERED, entry])
    gw = start_gateway_process(tmp_path)
    procs.append(gw)
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        thread_id = client.post("/api/threads", json={}).json()["thread_id"]
        assert "event: end" in client.post(f"/api/threads/{thread_id}/runs/stream", json=run_body("hello")).text
        run_id = client.get(f"/api/threads/{thread_id}/runs").json()[0]["run_id"]
    took = _stop(gw, within=within)
    log = gw.output()
    assert "Application shutdown complete" in log, log[-3000:]
    assert took < within - 10, took
    with sqlite3.connect(tmp_path / "deer-flow" / "deerflow.db") as db:
        assert db.execute("SELECT run_id FROM bufx_rows").fetchall() == [(run_id,)]
    return log


def test_a_blocking_service_stop_is_ended_and_the_others_still_flush(
    tmp_path: Path, gateway_processes: list[GatewayProcess]
) -> None:
    log = _run_then_sigint(tmp_path, gateway_processes, _entry("service_stop", 3600), within=40)
    assert f"Extension {EXT}: service stop is blocking the event loop" in log, log[-3000:]
    assert f"Extension {EXT}: service stop timed out after 10.0s; it blocked the event loop and was interrupted" in log


def test_a_thread_left_running_does_not_keep_the_process_alive(
    tmp_path: Path, gateway_processes: list[GatewayProcess]
) -> None:
    log = _run_then_sigint(tmp_path, gateway_processes, _entry("thread", 0), within=30)
    assert gateway_processes[0].proc.returncode == 0, log[-3000:]
    assert "1 thread(s) still running after shutdown" in log and "blocking-ext-poller in _forever" in log, log[-3000:]


def test_the_exit_bound_ends_a_shutdown_that_never_finishes(tmp_path: Path) -> None:
    """The last resort itself, in a process of its own: the ordered shutdown never completes."""
    script = textwrap.dedent(
        """
        import logging, threading, time
        from deerflow_ext.gateway.exit_bound import ExitBound

        logging.basicConfig(level=logging.INFO)
        print(time.monotonic(), flush=True)  # armed at (the imports before it may be slow on a busy machine)
        ExitBound(0.5, grace=0.3).arm()
        threading.Thread(target=lambda: time.sleep(3600), name="stuck", daemon=False).start()
        time.sleep(3600)  # the "shutdown" that never returns
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=subprocess_env(), capture_output=True, text=True, timeout=30, cwd=SRC
    )
    assert done.returncode == 1, done
    assert time.monotonic() - float(done.stdout.split()[0]) < 10  # one clock for every process (CLOCK_MONOTONIC)
    assert "shutdown did not finish within its bound" in done.stderr
    assert "1 thread(s) still running after shutdown" in done.stderr and "stuck in " in done.stderr
