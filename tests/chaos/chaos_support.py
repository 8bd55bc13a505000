"""Helpers of the chaos suite: real ``deerflow-ext serve`` processes, their memory and
descriptors, runs in flight, and the one line of figures each case prints.

Loads are scaled to a shared CI machine; ``DEERFLOW_CHAOS_FULL=1`` runs the figures of
docs/RELIABILITY.md instead (:func:`scaled`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from live_uvicorn import free_port

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
FULL = os.environ.get("DEERFLOW_CHAOS_FULL", "") == "1"
FINAL = ("success", "error", "interrupted", "timeout")
LIVE = ("pending", "running")
FIGURES: list[str] = []
"""One line per case; the conftest prints them at the end of the session."""


def scaled(ci: int, full: int) -> int:
    """``full`` under ``DEERFLOW_CHAOS_FULL=1``, else the CI figure."""
    return full if FULL else ci


def figure(case: str, **numbers: Any) -> str:
    """Record (and return) the case's line: ``chaos <case>: name=value ...``."""
    line = f"chaos {case}: " + " ".join(f"{k}={v}" for k, v in numbers.items())
    FIGURES.append(line)
    print(line)
    return line


def write_config(directory: Path, plugins: Sequence[dict[str, Any]] = (), **sections: Any) -> Path:
    """``config.yaml`` (as JSON, which is YAML) with the chaos extension first."""
    document: dict[str, Any] = {
        "plugins": [{"name": "chaos", "use": "chaos_ext:install"}, *plugins],
        "memory": {"enabled": False},
        "summarization": {"enabled": False},
        **sections,
    }
    path = directory / "config.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def proc_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_sockets(pid: int) -> int:
    """The process's open sockets (its connections and listeners), not its files: a busy
    moment may make the database pool open one more connection, which is kept, not leaked."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed between the listing and the read
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


@dataclass
class Gateway:
    """One ``deerflow-ext serve`` subprocess (``--workers N`` when asked)."""

    directory: Path
    database_url: str
    env: dict[str, str]
    workers: int = 1
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log_path(self) -> Path:
        return self.directory / f"gateway-{self.port}.log"

    def log(self) -> str:
        return self.log_path().read_text(encoding="utf-8", errors="replace")

    def start(self, *, within: float = 60.0) -> Gateway:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
                "PYTHONUNBUFFERED": "1",
                "DEERFLOW_CONFIG": str(self.directory / "config.yaml"),
                "DEERFLOW_DATABASE_URL": self.database_url,
                "DEERFLOW_LOG_LEVEL": "WARNING",
                **self.env,
            }
        )
        command = [sys.executable, "-m", "deerflow_ext.cli", "serve", "--port", str(self.port)]
        if self.workers > 1:
            command += ["--workers", str(self.workers)]
        with self.log_path().open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.directory, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.starts += 1
        deadline = time.monotonic() + within
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}:\n{self.log()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return self
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"gateway did not answer within {within}s:\n{self.log()[-4000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the whole process group (``--workers`` children included)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(45)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)


@contextlib.contextmanager
def gateways() -> Iterator[list[Gateway]]:
    """Every Gateway a test starts is SIGKILLed at the end, whatever happened."""
    started: list[Gateway] = []
    try:
        yield started
    finally:
        for gateway in started:
            gateway.kill()


def body(text: str, **extra: Any) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "user", "content": text}]}, **extra}


def new_thread(client: httpx.Client) -> str:
    response = client.post("/api/threads", json={})
    response.raise_for_status()
    return str(response.json()["thread_id"])


def start_run(client: httpx.Client, thread_id: str, text: str, **extra: Any) -> str:
    response = client.post(f"/api/threads/{thread_id}/runs", json=body(text, **extra))
    response.raise_for_status()
    return str(response.json()["run_id"])


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """Poll until ``predicate()`` is truthy; its last value (falsy on timeout). Transport
    errors count as "not yet": the process may be restarting."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (httpx.HTTPError, OSError):
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def run_rows(client: httpx.Client, runs: Sequence[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    return {run_id: client.get(f"/api/threads/{thread_id}/runs/{run_id}").json() for thread_id, run_id in runs}


def all_final(client: httpx.Client, runs: Sequence[tuple[str, str]], within: float) -> dict[str, dict[str, Any]]:
    """The run rows once none is pending/running; the test fails naming those still live."""
    rows: dict[str, dict[str, Any]] = {}

    def settled() -> bool:
        rows.update(run_rows(client, runs))
        return all(row.get("status") in FINAL for row in rows.values())

    if not wait_for(settled, within, interval=0.25):
        live = {r: row.get("status") for r, row in rows.items() if row.get("status") not in FINAL}
        raise AssertionError(f"{len(live)} run(s) not terminal after {within}s: {dict(list(live.items())[:5])}")
    return rows


def parse_sse(text: str) -> list[tuple[str, str, Any]]:
    """``(event, id, data)`` triples of an SSE body (comments skipped)."""
    events: list[tuple[str, str, Any]] = []
    name, event_id, data = None, "", []
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line.startswith("id: "):
            event_id = line[len("id: ") :]
        elif line == "" and name is not None:
            events.append((name, event_id, json.loads("\n".join(data))))
            name, event_id, data = None, "", []
    return events


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split()[0]
