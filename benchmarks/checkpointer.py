"""What the SQLite checkpointer costs a lead run: LangGraph's ``AsyncSqliteSaver`` against the
host's saver (``persistence/sqlite_saver.py``: ``SqliteSaver``, one thread hop per call).

Run: ``PYTHONPATH=src python benchmarks/checkpointer.py [--runs N] [--repeats R]``. Not a test:
it prints CPU per run, measured side by side in one process.

Each run is a real lead run on the embedded model through ``DeerFlowClient`` (title and
memory off, a fresh thread per run), on uvloop as the Gateway serves, each arm with its own
SQLite file at the host's ``synchronous`` setting. The arms alternate within every repeat so
a noisy neighbour hits both alike; each figure is the median over repeats of the mean per
run. "loop" is the CPU of the thread running the event loop (``time.thread_time``), the
issue-16 figure; "process" adds every other thread (aiosqlite's, the saver's).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import uvloop
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from deerflow_ext.client import DeerFlowClient
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.persistence.engine import SQLITE_SYNCHRONOUS
from deerflow_ext.persistence.sqlite_saver import open_sqlite_saver


@asynccontextmanager
async def langgraph_async_saver(path: str) -> AsyncIterator[Any]:
    """What ``open_checkpointer`` opened before its change to a shared pool."""
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        await saver.conn.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
        yield saver


def host_saver(path: str) -> AbstractAsyncContextManager[Any]:
    return open_sqlite_saver(path, pragmas=[f"synchronous={SQLITE_SYNCHRONOUS}"])


ARMS: dict[str, Callable[[str], AbstractAsyncContextManager[Any]]] = {
    "AsyncSqliteSaver": langgraph_async_saver,
    "host saver": host_saver,
}


async def _measure(client: DeerFlowClient, runs: int) -> tuple[float, float]:
    loop0, process0 = time.thread_time(), time.process_time()
    for i in range(runs):
        await client.arun(f"tell me about item {i}")
    return (time.thread_time() - loop0) / runs * 1e3, (time.process_time() - process0) / runs * 1e3


async def main(runs: int, repeats: int) -> None:
    config = AppConfig.model_validate({"memory": {"enabled": False}, "title": {"enabled": False}})
    folder = Path(tempfile.mkdtemp(prefix="bench-checkpointer-"))
    figures: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
    savers = {arm: opener(str(folder / f"{i}.db")) for i, (arm, opener) in enumerate(ARMS.items())}
    opened = {arm: await saver.__aenter__() for arm, saver in savers.items()}
    try:
        clients = {
            arm: DeerFlowClient(config, extensions=LoadedExtensions.empty(), checkpointer=saver)
            for arm, saver in opened.items()
        }
        for client in clients.values():
            await _measure(client, 3)  # warm: imports, first compile
        for repeat in range(repeats):
            order = list(clients) if repeat % 2 == 0 else list(reversed(clients))
            for arm in order:
                figures[arm].append(await _measure(clients[arm], runs))
        for client in clients.values():
            await client.aclose()
    finally:
        for saver in savers.values():
            await saver.__aexit__(None, None, None)
    print(f"{runs} runs x {repeats} repeats per arm; CPU per run, median of the repeats' means")
    for arm, values in figures.items():
        loop = statistics.median(v[0] for v in values)
        process = statistics.median(v[1] for v in values)
        print(f"  {arm:18s} loop {loop:6.2f} ms   process {process:6.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    uvloop.run(main(args.runs, args.repeats))
