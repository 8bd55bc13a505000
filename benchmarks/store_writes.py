"""What a store write costs next to a thread write: side by side in one run, the ratio printed.

Run: ``PYTHONPATH=src python benchmarks/store_writes.py [--database-url URL] [--ops N]
[--rounds R] [--concurrency C]``. Not a test. The target (issue: LangGraph Platform
completeness) is a ratio of at most 1: ``client.store.put_item`` costs no more than
``client.threads.create``.

Two pairs of arms, each pair alternating within every round so both see the same load:

- ``http``: ``langgraph_sdk``'s async client against one real Gateway (``deerflow-ext serve``
  in a subprocess, SQLite in a temporary folder unless ``--database-url`` names another
  database), ``C`` clients at once: ``store.put_item`` of a new key against
  ``threads.create``. Wall time per request, as a client sees it.
- ``in-process``: on one engine, ``ItemStore.abatch([PutOp])`` (what the route and a tool's
  ``runtime.store.aput`` run) against ``HostStore.create_thread`` (what ``threads.create``
  runs), one at a time: wall time and this process's CPU per write.

Each figure is the median over rounds of the mean per write.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from langgraph.store.base import PutOp
from langgraph_sdk import get_client

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.item_store import ItemStore
from gateway import serve_config

ROOT = Path(__file__).resolve().parents[1]
VALUE = {"theme": "dark", "language": "en", "tags": ["a", "b"], "count": 3}
METADATA = {"user": "bench", "source": "store_writes"}

Write = Callable[[int], Awaitable[object]]

_KEYS = itertools.count()  # every put writes a new item, as threads.create makes a new thread


def start_server(folder: Path, database_url: str) -> tuple[subprocess.Popen[bytes], str]:
    return serve_config(folder, "memory:\n  enabled: false\n", database_url=database_url)


async def _timed(write: Write, ops: int, concurrency: int) -> tuple[float, float]:
    """Wall and process CPU seconds per write, ``ops`` writes by ``concurrency`` workers."""
    counter = iter(range(ops))

    async def worker() -> None:
        for n in counter:
            await write(n)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.perf_counter() - wall) / ops, (time.process_time() - cpu) / ops


async def _pair(name: str, arms: dict[str, Write], ops: int, rounds: int, concurrency: int) -> None:
    for write in arms.values():  # warm-up: connections, statement caches, the first pages
        await _timed(write, max(20, ops // 10), concurrency)
    walls: dict[str, list[float]] = {arm: [] for arm in arms}
    cpus: dict[str, list[float]] = {arm: [] for arm in arms}
    for round_ in range(rounds):
        order = list(arms) if round_ % 2 == 0 else list(reversed(arms))
        for arm in order:
            wall, cpu = await _timed(arms[arm], ops, concurrency)
            walls[arm].append(wall)
            cpus[arm].append(cpu)
    store, thread = (statistics.median(walls[arm]) for arm in arms)
    print(f"{name}: {ops} writes x {rounds} rounds, {concurrency} at once")
    for arm in arms:
        wall, cpu = statistics.median(walls[arm]), statistics.median(cpus[arm])
        print(f"  {arm:<24} {wall * 1e3:7.3f} ms wall/write  {cpu * 1e3:7.3f} ms this process's CPU/write")
    print(f"  ratio store/thread (wall): {store / thread:.2f}")


async def http_pair(url: str, ops: int, rounds: int, concurrency: int) -> None:
    client = get_client(url=f"{url}/api", api_key=None)
    run = uuid.uuid4().hex[:8]

    async def put_item(n: int) -> object:
        return await client.store.put_item(["bench", run], f"k{next(_KEYS)}", VALUE)

    async def create_thread(n: int) -> object:
        return await client.threads.create(metadata=METADATA)

    arms = {"store.put_item": put_item, "threads.create": create_thread}
    await _pair("http (langgraph_sdk -> Gateway)", arms, ops, rounds, concurrency)


async def in_process_pair(database_url: str, ops: int, rounds: int) -> None:
    engine = create_engine(database_url)
    await upgrade_head(engine)
    threads = HostStore(make_session_factory(engine))
    items = ItemStore(engine)
    run = uuid.uuid4().hex[:8]
    try:

        async def put(n: int) -> object:
            return await items.abatch([PutOp(("bench", run), f"k{next(_KEYS)}", VALUE)])

        async def create(n: int) -> object:
            return await threads.create_thread(dict(METADATA))

        arms = {"ItemStore.abatch([PutOp])": put, "HostStore.create_thread": create}
        await _pair("in-process (one engine)", arms, ops, rounds, 1)
    finally:
        await items.aclose()
        await threads.aclose()
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: SQLite in a temporary folder")
    parser.add_argument("--ops", type=int, default=300, help="writes per arm per round (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, arms alternating (default 5)")
    parser.add_argument("--concurrency", type=int, default=4, help="HTTP clients at once (default 4)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="dfx-store-") as name:
        folder = Path(name)
        url = args.database_url or f"sqlite+aiosqlite:///{folder / 'gw.db'}"
        print(f"database: {url.split('://')[0]}")
        proc, served = start_server(folder, url)
        try:
            asyncio.run(http_pair(served, args.ops, args.rounds, args.concurrency))
        finally:
            proc.terminate()
            proc.wait(30)
        asyncio.run(in_process_pair(url, args.ops, args.rounds))


if __name__ == "__main__":
    main()
