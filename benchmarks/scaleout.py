"""Runs per second with two Gateway processes versus one, on the same machine, side by side.

Usage::

    PYTHONPATH=src python benchmarks/scaleout.py [--runs 200] [--concurrency 16]

It creates a fresh PostgreSQL database on 127.0.0.1:5432, starts one Gateway (the embedded
offline model, no extensions), drives ``--runs`` streamed runs spread over ``--concurrency``
threads (each thread's runs are sequential follow-ups, so both the per-thread barrier and
the cross-thread parallelism are exercised), then starts a second Gateway on the same
database and repeats with requests alternated between the two. It prints both rates and
their ratio. Not a test: the figure depends on the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spawn(directory: Path, database_url: str) -> tuple[subprocess.Popen[bytes], str]:
    config = directory / "config.yaml"
    config.write_text(json.dumps({"plugins": [], "summarization": {"enabled": False}}), encoding="utf-8")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DEERFLOW_DATABASE_URL": database_url}
    env["DEERFLOW_LOG_LEVEL"] = "WARNING"
    process = subprocess.Popen(
        [sys.executable, "-m", "deerflow_ext.cli", "serve", "--config", str(config), "--port", str(port)],
        cwd=directory,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Gateway exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return process, base
        time.sleep(0.1)
    raise RuntimeError("the Gateway did not start")


async def _drive(bases: list[str], runs: int, concurrency: int) -> float:
    """Streamed runs over ``concurrency`` threads; requests alternate between ``bases``."""
    async with httpx.AsyncClient(timeout=120) as client:
        threads = [
            (await client.post(f"{bases[i % len(bases)]}/api/threads", json={})).json()["thread_id"]
            for i in range(concurrency)
        ]
        per_thread = [runs // concurrency + (1 if i < runs % concurrency else 0) for i in range(concurrency)]
        counter = 0

        async def worker(index: int) -> None:
            nonlocal counter
            for n in range(per_thread[index]):
                counter += 1
                base = bases[counter % len(bases)]
                body = {"input": {"messages": [{"role": "user", "content": f"q{index}-{n}"}]}, "goal": None}
                async with client.stream("POST", f"{base}/api/threads/{threads[index]}/runs/stream", json=body) as r:
                    r.raise_for_status()
                    async for _ in r.aiter_bytes():
                        pass

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        return runs / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    import psycopg

    name = f"dfx_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            first, base1 = _spawn(Path(tmp), url)
            processes.append(first)
            asyncio.run(_drive([base1], max(8, args.runs // 10), args.concurrency))  # warm-up
            one = asyncio.run(_drive([base1], args.runs, args.concurrency))
            second, base2 = _spawn(Path(tmp), url)
            processes.append(second)
            asyncio.run(_drive([base2], max(8, args.runs // 10), args.concurrency))  # warm-up
            two = asyncio.run(_drive([base1, base2], args.runs, args.concurrency))
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"cores: {os.cpu_count()}  runs: {args.runs}  threads: {args.concurrency}")
    print(f"one process : {one:8.1f} runs/s")
    print(f"two processes: {two:8.1f} runs/s")
    print(f"ratio (two / one): {two / one:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
