"""``deerflow-ext serve`` as an operator sees it: the startup line, and its log formats.

A real ``serve`` subprocess on a free port; the log is read from its stderr.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import httpx
import pytest

from pg_support import PG_UNREACHABLE, fresh_database

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")


class Served:
    def __init__(self, process: subprocess.Popen[str], log: Path) -> None:
        self.process = process
        self.log = log

    def text(self) -> str:
        return self.log.read_text()

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            if self.process.poll() is not None:
                pytest.fail(f"serve exited with {self.process.returncode}:\n{self.text()}")
            time.sleep(0.05)
        pytest.fail(f"no {pattern!r} in the log:\n{self.text()}")


def _serve(tmp_path: Path, config: str, workers: str = "1", **env: str) -> Generator[Served]:
    (tmp_path / "config.yaml").write_text(config)
    log = tmp_path / "serve.log"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    environment["DEERFLOW_DATABASE_URL"] = f"sqlite:///{tmp_path / 'db' / 'deerflow.db'}"
    environment.update(env)
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "deerflow_ext.cli", "serve", "--port", "0", "--workers", workers],
            cwd=tmp_path,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        yield Served(process, log)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def text_server(tmp_path: Path) -> Iterator[Served]:
    yield from _serve(tmp_path, "plugins:\n  - name: gone\n    use: no_such_package_xyz:install\n")


@pytest.fixture
def json_server(tmp_path: Path) -> Iterator[Served]:
    yield from _serve(
        tmp_path, "plugins:\n  - name: gone\n    use: no_such_package_xyz:install\n", DEERFLOW_LOG_FORMAT="json"
    )


def test_the_startup_line_says_what_runs_where(text_server: Served, tmp_path: Path) -> None:
    found = text_server.wait_for(r"deerflow-ext \S+ starting: .* listening on http://127\.0\.0\.1:(\d+)\n")
    line = found.group(0)
    assert f"config {tmp_path / 'config.yaml'};" in line
    assert f"database sqlite:///{tmp_path / 'db' / 'deerflow.db'};" in line
    assert "models embedded (deerflow-embedded);" in line
    assert "extensions 0 loaded, 1 failed (none);" in line
    port = int(found.group(1))
    text_server.wait_for("Application startup complete")
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "degraded"
    text_server.wait_for(r"uvicorn\.access: .*GET /health")
    # One text shape for every line, uvicorn's included; no traceback for the failed extension.
    lines = [ln for ln in text_server.text().splitlines() if ln.strip()]
    assert all(TEXT_LINE.match(ln) for ln in lines), lines
    assert "Traceback" not in text_server.text()


def test_json_logs_are_one_object_per_line_with_attribution_and_access_log(json_server: Served) -> None:
    found = json_server.wait_for(r"listening on http://127\.0\.0\.1:(\d+)")
    port = int(found.group(1))
    json_server.wait_for("Application startup complete")
    httpx.get(f"http://127.0.0.1:{port}/api/threads/nope", timeout=10)
    json_server.wait_for(r'"logger": "uvicorn.access"')
    records = [json.loads(ln) for ln in json_server.text().splitlines() if ln.strip()]
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    (failure,) = [r for r in records if r.get("extension") == "no_such_package_xyz:install"]
    assert failure["level"] == "ERROR" and failure["phase"] == "load"
    assert failure["message"].startswith("Extension no_such_package_xyz:install: ")
    (access,) = [r for r in records if r["logger"] == "uvicorn.access"]
    assert access["method"] == "GET" and access["path"] == "/api/threads/nope" and access["status"] == 404
    assert any(r["message"].startswith("deerflow-ext ") and " starting: " in r["message"] for r in records)


def test_ctrl_c_stops_serve_in_order_with_exit_130(text_server: Served) -> None:
    """README's exit-code table: 130 interrupted (it was 0, or a KeyboardInterrupt traceback)."""
    import signal

    text_server.wait_for("Application startup complete")
    text_server.process.send_signal(signal.SIGINT)
    assert text_server.process.wait(60) == 130, text_server.text()
    log = text_server.text()
    assert "Application shutdown complete" in log and "Traceback" not in log


@pytest.mark.skipif(PG_UNREACHABLE is not None, reason=PG_UNREACHABLE or "")
def test_ctrl_c_stops_serve_with_workers_with_exit_130(tmp_path: Path) -> None:
    """The same row under ``--workers 2`` (it exited 0: uvicorn's supervisor kept the SIGINT),
    serving on the address its startup line names (``--port 0``: it was another port)."""
    import signal

    with fresh_database("dfx_serve_workers") as name:
        served = _serve(tmp_path, "", DEERFLOW_DATABASE_URL=f"postgresql://postgres@127.0.0.1:5432/{name}", workers="2")
        text_server = next(served)
        try:
            port = int(text_server.wait_for(r"listening on http://127\.0\.0\.1:(\d+)\n").group(1))
            text_server.wait_for(r"(?s)Application startup complete.*Application startup complete", timeout=120)
            assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "ok"
            text_server.process.send_signal(signal.SIGINT)
            assert text_server.process.wait(60) == 130, text_server.text()
            log = text_server.text()
            assert log.count("Application shutdown complete") == 2 and "Traceback" not in log, log
        finally:
            served.close()
