"""Concurrency soak: 200 runs from 20 threads through a stateful extension.

The extension keeps a per-run mark in the task store and app-store tallies (see
``stateful_ext``). After the soak: no call ever saw another run's mark (no cross-run leakage
of task-store values), every ``on_task_start`` has exactly one ``on_task_stop`` for the same
run, each with the outcome persisted, and the tallies add up exactly to 200.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import stateful_ext

from conftest import ThreadedServer, make_settings, parse_sse, run_body

THREADS, RUNS = 20, 200
ENTRY = {"name": "stateful", "use": "stateful_ext:install"}


def _check_ledger(run_ids: list[str], app_store: Any) -> None:
    ledger = stateful_ext.LEDGER
    assert ledger.leaks == [], ledger.leaks[:5]
    assert sorted(ledger.starts) == sorted(run_ids)
    assert Counter(r for r, _, _ in ledger.stops) == Counter(run_ids)  # exactly one stop per start
    assert {o for _, o, _ in ledger.stops} == {"completed"}
    assert all(calls >= 1 for _, _, calls in ledger.stops), ledger.stops[:5]
    tally = app_store.get(stateful_ext.Tally)
    assert (tally.starts, tally.stops) == (RUNS, RUNS)


def test_http_soak_200_runs_20_threads(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    stateful_ext.LEDGER.clear()
    app = create_app(make_settings(tmp_path, [ENTRY]))
    server = ThreadedServer(app)
    try:

        def worker(w: int) -> list[tuple[str, str]]:
            out = []
            with httpx.Client(base_url=server.url, timeout=60) as client:
                for i in range(RUNS // THREADS):
                    thread_id = client.post("/api/threads", json={}).json()["thread_id"]
                    response = client.post(f"/api/threads/{thread_id}/runs/stream", json=run_body(f"w{w} run {i}"))
                    events = parse_sse(response.text)
                    assert events[0][0] == "metadata" and events[-1][0] == "end", events[-3:]
                    assert events[-1][1]["status"] == "success", events[-1]
                    out.append((thread_id, events[0][1]["run_id"]))
            return out

        with ThreadPoolExecutor(THREADS) as pool:
            results = [r for chunk in pool.map(worker, range(THREADS)) for r in chunk]
        assert len(results) == RUNS
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for thread_id, run_id in results[:: RUNS // 20]:  # spot-check persistence
                row = client.get(f"/api/threads/{thread_id}/runs/{run_id}").json()
                assert (row["status"], row["outcome"]) == ("success", "completed")
    finally:
        server.close()
    _check_ledger([r for _, r in results], app.state.extensions.app_store)


def test_embedded_client_soak_200_runs_20_threads() -> None:
    """The same through DeerFlowClient: 20 threads, each its own client and event loop, sharing
    one snapshot (and so one app store) and the process-wide notification loop slot."""
    from deerflow_ext.client import DeerFlowClient
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.plugin_loading.loader import load_extensions

    stateful_ext.LEDGER.clear()
    config = AppConfig.model_validate({"plugins": [ENTRY], "memory": {"enabled": False}})
    extensions = load_extensions(config)

    def worker(w: int) -> list[str]:
        client = DeerFlowClient(config, extensions=extensions)

        async def runs() -> list[str]:
            ids = []
            for i in range(RUNS // THREADS):
                events = [e async for e in client.astream(f"w{w} run {i}")]
                ids.append(events[0][1]["run_id"])
            return ids

        return asyncio.run(asyncio.wait_for(runs(), 120))

    with ThreadPoolExecutor(THREADS) as pool:
        run_ids = [r for chunk in pool.map(worker, range(THREADS)) for r in chunk]
    _check_ledger(run_ids, extensions.app_store)
