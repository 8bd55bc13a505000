"""A cancel that lands while a run is being admitted.

Admission is "hold the thread, mark the run started (run ``running``, thread ``busy``)". A
cancel delivered inside that write used to record the run as "interrupted before it started"
with ``started_at`` set, call no hook, and leave the thread ``busy`` forever, even across
restarts. The spec's line is the mark: a run cancelled before it gets neither hook, a run
marked started gets both. The sweep below cancels after every possible number of loop steps,
so each suspension point of the admission path is hit; the HTTP test is the issue's own
reproduction (create, then cancel at once, many times).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import stateful_ext

from conftest import live_server, make_settings, new_thread, run_body, wait_run

ENTRY = {"name": "stateful", "use": "stateful_ext:install"}
LIVE = ("pending", "running")


def _app(tmp_path: Path) -> Any:
    from deerflow_ext.gateway import create_app

    return create_app(make_settings(tmp_path, [ENTRY]))


async def _check(client: httpx.AsyncClient, thread_id: str, run_id: str) -> dict[str, Any]:
    """The spec's invariants for one cancelled run; returns its row."""
    row = await wait_run(client, thread_id, run_id, within=20)
    assert row["status"] not in LIVE, row
    thread = (await client.get(f"/api/threads/{thread_id}")).json()
    assert thread["status"] != "busy", (thread, row)
    started = row["started_at"] is not None
    ledger = stateful_ext.LEDGER
    hooks = (run_id in ledger.starts, any(r == run_id for r, _, _ in ledger.stops))
    # Marked started <=> both hooks; not started <=> neither (spec, Lifecycle "Timing").
    assert hooks == (started, started), (row, hooks)
    if row["error"] == "interrupted before it started":
        assert not started, row
    return row


async def test_cancel_after_every_step_of_admission(tmp_path: Path) -> None:
    stateful_ext.LEDGER.clear()
    app = _app(tmp_path)
    seen: set[tuple[bool, str]] = set()
    async with live_server(app) as live, live.client() as client:
        runs = app.state.runtime.runs
        for steps in range(0, 80):
            thread_id = await new_thread(client)
            handle = await runs.start(thread_id, messages=[{"role": "user", "content": f"step {steps}"}])
            for _ in range(steps):
                await asyncio.sleep(0)
            runs.cancel(handle.run_id)
            await asyncio.wait_for(handle.wait(), 20)
            row = await _check(client, thread_id, handle.run_id)
            seen.add((row["started_at"] is not None, row["status"]))
    # The sweep covered both sides of the mark: cancelled before it, and after it.
    assert (False, "interrupted") in seen and (True, "interrupted") in seen, seen


async def test_create_then_cancel_at_once_over_http(tmp_path: Path) -> None:
    stateful_ext.LEDGER.clear()
    app = _app(tmp_path)
    async with live_server(app) as live, live.client() as client:
        for i in range(150):
            thread_id = await new_thread(client)
            run_id = (await client.post(f"/api/threads/{thread_id}/runs", json=run_body(f"try {i}"))).json()["run_id"]
            cancel = await client.post(f"/api/threads/{thread_id}/runs/{run_id}/cancel")
            assert cancel.status_code == 202, cancel.text
            await _check(client, thread_id, run_id)


async def test_startup_repairs_a_thread_left_busy_with_no_live_run(tmp_path: Path) -> None:
    """What the race left in databases written before the fix: a finished run, a busy thread."""
    from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
    from deerflow_ext.persistence.records import PROCESS_OWNER

    settings = make_settings(tmp_path, [])
    engine = create_engine(settings.async_database_url)
    try:
        await upgrade_head(engine)
        store = HostStore(make_session_factory(engine))
        wedged = (await store.create_thread()).id
        await store.create_run(wedged, "r-wedged", {}, owner=PROCESS_OWNER)
        await store.mark_started("r-wedged", wedged)
        error = "interrupted before it started"
        await store.finish_run("r-wedged", status="interrupted", outcome="aborted", error=error)
        live_elsewhere = (await store.create_thread()).id  # a run still running: left alone
        await store.create_run(live_elsewhere, "r-live", {}, owner="another-host:1:abc")
        await store.mark_started("r-live", live_elsewhere)
    finally:
        await engine.dispose()

    from deerflow_ext.gateway import create_app

    async with live_server(create_app(settings)) as live, live.client() as client:
        assert (await client.get(f"/api/threads/{wedged}")).json()["status"] == "interrupted"
        assert (await client.get(f"/api/threads/{live_elsewhere}")).json()["status"] == "busy"
        response = await client.post(f"/api/threads/{wedged}/runs", json=run_body("again"))
        assert (await wait_run(client, wedged, response.json()["run_id"]))["status"] == "success"
