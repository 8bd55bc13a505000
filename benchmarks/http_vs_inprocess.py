"""HTTP + SSE against an in-process reference that does the same work: the Gateway's served
runs per second over its in-process runs per second, at 1, 8 and 32 clients.

Run: ``PYTHONPATH=src python benchmarks/http_vs_inprocess.py [--runs N] [--rounds R]``.
Not a test: prints ratios measured side by side (arms alternate within each round).

Both arms are the same Gateway, built the same way, on SQLite, with the same no-op lifecycle
extension (``benchmarks/gateway.py``'s), so each run creates a thread, persists its pending
row, is admitted, runs the lead agent on the embedded model, checkpoints, publishes its
events to the stream bridge and saves its end. The served arm does it through
``deerflow-ext serve`` (uvicorn) for ``POST /api/threads`` + ``POST .../runs/stream`` read to
``end``; the in-process arm calls the app's own runtime (``store.create_thread``,
``runs.start``) and reads the run's events from the bridge to ``end``. The difference is
HTTP, SSE framing and the client: what this Gateway adds to the work itself. The servers run
on CPU 0 (the served one in its process, the in-process one in this process while its arm
runs); the HTTP client runs on CPU 1.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from gateway import EXTENSION, _drive, http_arm, start_server

CONCURRENCY = (1, 8, 32)
PROMPT = "tell me about the gateway"


class InProcess:
    """The Gateway app's runtime, started as ``serve`` starts it, without a server."""

    def __init__(self, directory: Path) -> None:
        from deerflow_ext.config.loading import load_app_config
        from deerflow_ext.config.settings import Settings
        from deerflow_ext.gateway import create_app

        config = directory / "config.yaml"
        config.write_text(f"plugins:\n  - name: noop\n    use: {EXTENSION}:install\nmemory:\n  enabled: false\n")
        settings = Settings(config=config, database_url=f"sqlite+aiosqlite:///{directory / 'inproc.db'}")
        self.app = create_app(settings, config=load_app_config(config))

    async def one(self) -> None:
        from deerflow_ext.runtime.stream import END_EVENT, StreamEvent, follow
        from deerflow_ext.runtime.stream_modes import DEFAULT_STREAM_MODES
        from deerflow_ext.runtime.worker import LeadRunSpec

        runtime = self.app.state.runtime
        thread = await runtime.store.create_thread({})
        message = {"role": "user", "content": PROMPT}
        spec = LeadRunSpec(messages=(message,), stream_modes=DEFAULT_STREAM_MODES)
        handle = await runtime.runs.start(thread.id, spec=spec, run_input={"input": {"messages": [message]}})
        last = None
        async for event in follow(runtime.runs.streams, handle.run_id, None, heartbeat=30.0):
            if isinstance(event, StreamEvent):
                last = event.event
        if last != END_EVENT:
            raise RuntimeError(f"the run's events ended without {END_EVENT}: {last!r}")


async def _in_process_rate(reference: InProcess, total: int, concurrency: int) -> float:
    os.sched_setaffinity(0, {0})
    try:
        wall = await _drive(reference.one, total, concurrency)
    finally:
        os.sched_setaffinity(0, _ALL)
    return total / wall


async def _served_rate(url: str, total: int, concurrency: int) -> float:
    os.sched_setaffinity(0, {1})
    try:
        rate, _ = await http_arm(url, total, concurrency)
    finally:
        os.sched_setaffinity(0, _ALL)
    return rate


_ALL = os.sched_getaffinity(0)


async def main(runs: int, rounds: int) -> None:
    sys.modules.setdefault(EXTENSION, sys.modules["gateway"])
    print(f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; load {os.getloadavg()}")
    print(f"{runs} runs per arm, client count and round; {rounds} rounds, arms alternating")
    with tempfile.TemporaryDirectory(prefix="dfx-hvi-") as name:
        proc, url = start_server(Path(name))
        os.sched_setaffinity(proc.pid, {0})
        reference = InProcess(Path(name))
        try:
            async with reference.app.router.lifespan_context(reference.app):
                await _served_rate(url, 20, 4)  # warm-up, both arms
                await _in_process_rate(reference, 20, 4)
                print(f"{'clients':>7} {'served runs/s':>14} {'in-process':>11} {'ratio':>7}   per round")
                for clients in CONCURRENCY:
                    served: list[float] = []
                    local: list[float] = []
                    for r in range(rounds):
                        arms: list[Any] = [
                            (served, functools.partial(_served_rate, url, runs, clients)),
                            (local, functools.partial(_in_process_rate, reference, runs, clients)),
                        ]
                        for sink, arm in arms if r % 2 == 0 else arms[::-1]:
                            sink.append(await arm())
                    ratios = [s / i for s, i in zip(served, local, strict=True)]
                    print(
                        f"{clients:>7} {statistics.median(served):>14.1f} {statistics.median(local):>11.1f}"
                        f" {statistics.median(ratios):>6.2f}x   {min(ratios):.2f}-{max(ratios):.2f}"
                    )
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"load at the end {os.getloadavg()}; target: served >= 0.8x in-process")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.rounds))
