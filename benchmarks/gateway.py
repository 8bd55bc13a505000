"""Runs per second over HTTP+SSE against a real uvicorn vs ``DeerFlowClient`` in-process,
p50/p99 latency, and the server's RSS over many runs.

Run: ``PYTHONPATH=src python benchmarks/gateway.py [--runs N]`` (``--runs 10000`` for the
full RSS figure; the default finishes in a few minutes). Not a test: prints figures.

The Gateway is ``deerflow-ext serve`` in a subprocess on 127.0.0.1 (SQLite in a temp dir,
memory off) with one no-op lifecycle extension, so every run allocates a task store and
calls both hooks — the state that must not leak. Each run creates a thread and streams one
lead run on the embedded model (``POST /api/threads`` + ``POST .../runs/stream``, read to the
``end`` event); latency is the stream request alone. The in-process arm runs the same lead
runs through ``DeerFlowClient`` with the same extension and the same concurrency on one
event loop, a fresh thread per run in both arms.

RSS: the server's ``VmRSS`` from ``/proc`` after a warm-up, then sampled every ``runs/10``
runs during the long phase at concurrency 8; the growth from the first sample to the last,
and per 1000 runs, is printed. Flat (within allocator noise) means no leaked task stores,
run handles or streams. Ended runs' streams are retained for resume (600 s by default), so
a phase shorter than that grows by what they hold (~10 MiB per 1000 runs): ``--retain-seconds
5`` keeps that window short enough for the phase to show any other growth.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = (1, 8, 32)
EXTENSION = "benchmarks_gateway_ext"


class NoOpLifecycle:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        task_store.set(info)

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        assert task_store.get(type(info)) is info


def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(NoOpLifecycle())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _http_run(client: httpx.AsyncClient, latencies: list[float]) -> None:
    thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": "tell me about the gateway"}]}}
    start = time.perf_counter()
    async with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=body) as response:
        last = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                last = line
    latencies.append(time.perf_counter() - start)
    if last != "event: end":
        raise RuntimeError(f"stream ended without an end event: {last!r}")


async def _drive(one: Any, total: int, concurrency: int) -> float:
    """Run ``one()`` ``total`` times with ``concurrency`` workers; returns wall seconds."""
    counter = iter(range(total))

    async def worker() -> None:
        for _ in counter:
            await one()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def http_arm(url: str, total: int, concurrency: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        wall = await _drive(lambda: _http_run(client, latencies), total, concurrency)
    return total / wall, latencies


async def client_arm(total: int, concurrency: int) -> tuple[float, list[float]]:
    from deerflow_ext.client import DeerFlowClient
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.plugin_loading.loader import load_extensions

    config = AppConfig.model_validate(
        {"plugins": [{"name": "noop", "use": f"{EXTENSION}:install"}], "memory": {"enabled": False}}
    )
    client = DeerFlowClient(config, extensions=load_extensions(config))
    latencies: list[float] = []

    async def one() -> None:
        start = time.perf_counter()
        await client.arun("tell me about the gateway")
        latencies.append(time.perf_counter() - start)

    await _drive(one, max(4, concurrency), concurrency)  # warm-up
    latencies.clear()
    wall = await _drive(one, total, concurrency)
    await client.aclose()
    return total / wall, latencies


def start_server(tmp: Path, retain_seconds: float | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """This benchmark's Gateway: the no-op lifecycle extension, memory off, SQLite in ``tmp``."""
    extra = {} if retain_seconds is None else {"DEERFLOW_STREAM_RETAIN_SECONDS": str(retain_seconds)}
    config = f"plugins:\n  - name: noop\n    use: {EXTENSION}:install\nmemory:\n  enabled: false\n"
    return serve_config(tmp, config, extra_env=extra)


def serve_config(
    folder: Path, config: str, *, database_url: str | None = None, extra_env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``deerflow-ext serve`` on ``config`` (config.yaml text) in ``folder``, SQLite there unless
    ``database_url``, this checkout's ``src`` and ``benchmarks`` importable; its process and URL
    once ``/health`` answers."""
    (folder / "config.yaml").write_text(config)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")]),
        DEERFLOW_CONFIG=str(folder / "config.yaml"),
        DEERFLOW_DATABASE_URL=database_url or f"sqlite+aiosqlite:///{folder / 'gw.db'}",
        DEERFLOW_LOG_LEVEL="WARNING",
        **(extra_env or {}),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "deerflow_ext.cli", "serve", "--port", str(port)],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(folder / "server.log").open("wb"),  # closed with the process
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError((folder / "server.log").read_text())
        time.sleep(0.1)


async def main(runs: int, per_level: int, retain_seconds: float | None = None) -> None:
    sys.modules.setdefault(EXTENSION, sys.modules[__name__])
    print(f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; {per_level} runs per concurrency level")
    with tempfile.TemporaryDirectory(prefix="dfx-gw-") as name:
        proc, url = start_server(Path(name), retain_seconds)
        try:
            await http_arm(url, 20, 4)  # warm-up
            print(f"{'clients':>7} {'arm':<16}{'runs/s':>9}{'p50 ms':>9}{'p99 ms':>9}   http/in-process")
            for c in CONCURRENCY:
                rate_http, lat_http = await http_arm(url, per_level, c)
                rate_local, lat_local = await client_arm(per_level, c)
                for arm, rate, lat in (("http+sse", rate_http, lat_http), ("DeerFlowClient", rate_local, lat_local)):
                    print(
                        f"{c:>7} {arm:<16}{rate:>9.1f}{_pct(lat, 0.5) * 1e3:>9.1f}{_pct(lat, 0.99) * 1e3:>9.1f}", end=""
                    )
                    print(f"   {rate_http / rate_local:.2f}x" if arm == "http+sse" else "")

            samples = [(0, _rss_kib(proc.pid))]
            step = max(1, runs // 10)
            done = 0
            start = time.perf_counter()
            while done < runs:
                n = min(step, runs - done)
                await http_arm(url, n, 8)
                done += n
                samples.append((done, _rss_kib(proc.pid)))
            elapsed = time.perf_counter() - start
        finally:
            proc.terminate()
            proc.wait(30)
    first, last = samples[1][1], samples[-1][1]  # growth measured after the first step (warm caches)
    span = samples[-1][0] - samples[1][0]
    print(f"RSS of the server over {runs} runs at 8 clients ({runs / elapsed:.1f} runs/s), MiB:")
    print("  " + ", ".join(f"{n}:{kib / 1024:.1f}" for n, kib in samples))
    per_k = (last - first) / 1024 / span * 1000 if span else 0.0
    print(
        f"  growth after the first {samples[1][0]} runs: {(last - first) / 1024:+.1f} MiB "
        f"({per_k:+.2f} MiB per 1000 runs)"
    )
    print(f"  median of samples: {statistics.median(k for _, k in samples) / 1024:.1f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=600, help="runs for the RSS phase (10000 for the full figure)")
    parser.add_argument("--per-level", type=int, default=96, help="runs per concurrency level")
    parser.add_argument(
        "--retain-seconds",
        type=float,
        help="the server's DEERFLOW_STREAM_RETAIN_SECONDS (default its own, 600): ended runs' streams are kept "
        "that long for resume, so over a run shorter than that RSS grows by what they hold",
    )
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.per_level, args.retain_seconds))
