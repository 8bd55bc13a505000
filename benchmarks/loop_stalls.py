"""How long ``/ok`` waits while the heavy requests of issue 54 rows 2-4 run, at the issue's sizes.

Run: ``PYTHONPATH=$PWD/src python benchmarks/loop_stalls.py [--items 1000] [--turns 40] [--chars 4000]``
(an absolute ``PYTHONPATH``: the server starts in a directory of its own).
Not a test: prints one line per case (figures for docs/RELIABILITY.md).

A ``deerflow-ext serve`` process on SQLite (its own directory, the offline model, memory
off) is filled, then a thread polls ``/ok`` every 20 ms while the heavy requests run at once
from other threads; the poller's worst and median wait are what any other client of that
process waited. The cases:

- ``store``: ``--items`` items of 200 KiB under one namespace; three searches with a
  ``filter`` that matches none of them (every value read) and one ``limit: 1000`` search;
- ``threads``: a thread of ``--turns`` runs (each question ``--chars`` long, the offline
  model's answers), then three
  ``threads.copy`` of it and ``history?limit=1000``.

The server's RSS (``/proc``) before and at its peak during the heavy requests is printed too.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    (directory / "config.yaml").write_text("plugins: []\nmemory:\n  enabled: false\n")
    port = _port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    env["DEERFLOW_CONFIG"] = str(directory / "config.yaml")
    env["DEERFLOW_DATABASE_URL"] = f"sqlite+aiosqlite:///{directory / 'deerflow.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "deerflow_ext.cli", "serve", "--port", str(port)],
        cwd=directory,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the Gateway did not start")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _measure(url: str, pid: int, heavy: list[Callable[[httpx.Client], httpx.Response]]) -> str:
    waits: list[float] = []
    peak = before = _rss_mib(pid)
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        with httpx.Client(base_url=url, timeout=300) as client:
            while not done.is_set():
                started = time.monotonic()
                client.get("/ok")
                waits.append(time.monotonic() - started)
                peak = max(peak, _rss_mib(pid))
                time.sleep(0.02)

    answers: list[tuple[int, int, float]] = []

    def one(request: Callable[[httpx.Client], httpx.Response]) -> None:
        with httpx.Client(base_url=url, timeout=300) as client:
            started = time.monotonic()
            answer = request(client)
            answers.append((answer.status_code, len(answer.content), time.monotonic() - started))

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.2)
    workers = [threading.Thread(target=one, args=(request,)) for request in heavy]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    poller.join()
    statuses = sorted({status for status, _, _ in answers})
    biggest = max(size for _, size, _ in answers) / 2**20
    slowest = max(seconds for _, _, seconds in answers)
    return (
        f"ok_worst_ms={max(waits) * 1000:.0f} ok_p50_ms={statistics.median(waits) * 1000:.0f} polls={len(waits)} "
        f"statuses={statuses} biggest_answer_mib={biggest:.1f} slowest_s={slowest:.1f} "
        f"rss_mib={before:.0f}->{peak:.0f}"
    )


def _store(url: str, pid: int, items: int) -> str:
    pad = "x" * (200 * 1024)
    with httpx.Client(base_url=url, timeout=60) as client:
        for i in range(items):
            body = {"namespace": ["big"], "key": f"k{i:05}", "value": {"pad": pad, "i": i}}
            assert client.put("/api/store/items", json=body).status_code == 204

    def search(body: dict[str, object]) -> Callable[[httpx.Client], httpx.Response]:
        return lambda c: c.post("/api/store/items/search", json={"namespace_prefix": ["big"], **body})

    heavy = [search({"filter": {"i": -1}}) for _ in range(3)] + [search({"limit": 1000})]
    return f"store items={items} " + _measure(url, pid, heavy)


def _threads(url: str, pid: int, turns: int, chars: int) -> str:
    with httpx.Client(base_url=url, timeout=120) as client:
        thread_id = client.post("/api/threads", json={}).json()["thread_id"]
        for turn in range(turns):
            question = f"turn {turn}: " + ("tell me more " * chars)[:chars]
            body = {"input": {"messages": [{"role": "user", "content": question}]}}
            answer = client.post(f"/api/threads/{thread_id}/runs/wait", json=body)
            assert answer.status_code == 200, answer.text
        checkpoints = len(client.get(f"/api/threads/{thread_id}/history", params={"limit": 1000}).json())
    heavy: list[Callable[[httpx.Client], httpx.Response]] = [
        lambda c: c.post(f"/api/threads/{thread_id}/copy") for _ in range(3)
    ]
    heavy.append(lambda c: c.get(f"/api/threads/{thread_id}/history", params={"limit": 1000}))
    return f"threads turns={turns} chars={chars} checkpoints={checkpoints} " + _measure(url, pid, heavy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--chars", type=int, default=4000)
    args = parser.parse_args()
    for case in ("store", "threads"):
        with tempfile.TemporaryDirectory() as directory:
            proc, url = _serve(Path(directory))
            try:
                line = (
                    _store(url, proc.pid, args.items)
                    if case == "store"
                    else _threads(url, proc.pid, args.turns, args.chars)
                )
            finally:
                proc.terminate()
                proc.wait(30)
            load = os.getloadavg()[0]
            print(f"loop_stalls {line} load={load:.2f} at={time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
