"""Helpers of the scale-out suite: PostgreSQL reachability, Gateway subprocesses, polling."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from live_uvicorn import free_port

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
LEASE_SECONDS = 2.0
STARTUP_TIMEOUT = 60.0


@dataclass
class Gateway:
    name: str
    base_url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path

    def log(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def client(self, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@dataclass
class Cluster:
    gateways: list[Gateway]
    hook_log: Path
    database_url: str

    def hooks(self) -> list[dict[str, Any]]:
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]


def spawn_gateways(
    directory: Path,
    database_url: str,
    count: int,
    *,
    extra_env: dict[str, str] | None = None,
    extra_plugins: tuple[dict[str, Any], ...] = (),
    extra_args: tuple[str, ...] = (),
    extra_config: dict[str, Any] | None = None,
) -> Cluster:
    """Start ``count`` Gateways at once (their migrations race on purpose) and wait for /health.

    ``extra_plugins`` come after the scale-out extension; modules under ``tests/gateway`` are
    importable too (the SDK suite's gate extension). ``extra_args`` go to ``serve``
    (``--workers 2``); ``extra_config`` adds top-level keys of config.yaml (``models:``,
    ``title:``...)."""
    hook_log = directory / "hooks.jsonl"
    config = directory / "config.yaml"
    document = {
        "plugins": [
            {"name": "scaleout", "use": "scaleout_ext:install", "required": True, "config": {"log": str(hook_log)}},
            *extra_plugins,
        ],
        # No compaction: the thread's checkpoint must keep every message the runs produced.
        "summarization": {"enabled": False},
        **(extra_config or {}),
    }
    config.write_text(json.dumps(document), encoding="utf-8")  # JSON is YAML
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE), str(HERE.parent / "gateway")]),
        "DEERFLOW_DATABASE_URL": database_url,
        "DEERFLOW_THREAD_LEASE_SECONDS": str(LEASE_SECONDS),
        "DEERFLOW_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    env.pop("DEERFLOW_CONFIG", None)
    gateways = []
    for i in range(count):
        port = free_port()
        stderr_path = directory / f"gateway{i}.stderr"
        with stderr_path.open("wb") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "deerflow_ext.cli",
                    "serve",
                    "--config",
                    str(config),
                    "--port",
                    str(port),
                    *extra_args,
                ],
                cwd=directory,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        gateways.append(Gateway(f"gw{i}", f"http://127.0.0.1:{port}", process, stderr_path))
    deadline = time.monotonic() + STARTUP_TIMEOUT
    for gateway in gateways:
        while True:
            if gateway.process.poll() is not None:
                for g in gateways:
                    g.stop()
                raise RuntimeError(f"{gateway.name} exited with {gateway.process.returncode}:\n{gateway.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{gateway.base_url}/health", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                for g in gateways:
                    g.stop()
                raise RuntimeError(f"{gateway.name} did not answer /health:\n{gateway.log()}")
            time.sleep(0.1)
    return Cluster(gateways, hook_log, database_url)


def body(text: str) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "user", "content": text}]}, "goal": None}


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def run_status(gateway: Gateway, thread_id: str, run_id: str) -> dict[str, Any]:
    with gateway.client() as client:
        response = client.get(f"/api/threads/{thread_id}/runs/{run_id}")
        response.raise_for_status()
        return response.json()


def wait_done(gateway: Gateway, thread_id: str, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
    final = ("success", "error", "interrupted")
    run = wait_for(lambda: (r := run_status(gateway, thread_id, run_id))["status"] in final and r, timeout)
    assert run, f"run {run_id} did not finish within {timeout}s"
    return run


def checkpoint_messages(database_url: str, thread_id: str) -> list[Any]:
    """The thread's messages as the LangGraph checkpointer stored them (shared by all processes)."""
    import asyncio

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async def read() -> list[Any]:
        async with AsyncPostgresSaver.from_conn_string(database_url) as saver:
            saved = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
            return list((saved.checkpoint["channel_values"].get("messages") or []) if saved else [])

    return asyncio.run(read())
