"""KeyboardInterrupt from an extension at run time, in a real Gateway process.

The spec: "KeyboardInterrupt and SystemExit always propagate." For a Gateway that means the
same as an operator's Ctrl-C: the process stops instead of serving on with a half-finished
run. "Keeps serving" then means *recoverable*: on restart the run the interrupt cut short is
marked ``interrupted`` (never left ``running``), and the Gateway serves again.

A contributor that only the HTTP layer calls (a router) is different: uvicorn contains any
exception of one request, so the process goes on serving.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from conftest import (
    GatewayProcess,
    live_server,
    make_settings,
    run_body,
    start_gateway_process,
    wait_run,
    write_config,
)


def _entry(kind: str) -> dict[str, object]:
    return {"name": "faulty", "use": "faulty_ext:install", "config": {"kind": kind, "mode": "interrupt"}}


def _wait_exit(gw: GatewayProcess, within: float = 20) -> int:
    deadline = time.monotonic() + within
    while gw.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    code = gw.proc.poll()
    assert code is not None, f"the Gateway kept running after KeyboardInterrupt:\n{gw.output()[-2000:]}"
    return code


def _interrupted_run(tmp_path: Path, procs: list[GatewayProcess], kind: str) -> tuple[str, str | None]:
    """Start a Gateway process, trigger the interrupt with one run, wait for the process to end."""
    write_config(tmp_path / "config.yaml", [_entry(kind)])
    gw = start_gateway_process(tmp_path)
    procs.append(gw)
    run_id = None
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        thread_id = client.post("/api/threads", json={}).json()["thread_id"]
        try:
            run_id = client.post(f"/api/threads/{thread_id}/runs", json=run_body("hello FAULT")).json()["run_id"]
        except httpx.HTTPError:
            pass  # the process went down before answering
    _wait_exit(gw)
    return thread_id, run_id


@pytest.mark.parametrize("kind", ["lifecycle_start", "wrap", "assembly"])
async def test_interrupt_in_a_run_stops_the_gateway_and_the_run_recovers(
    tmp_path: Path, gateway_processes: list[GatewayProcess], kind: str
) -> None:
    thread_id, run_id = await asyncio.to_thread(_interrupted_run, tmp_path, gateway_processes, kind)
    # uvicorn.run swallows the KeyboardInterrupt it stops on: exit code 0, as for Ctrl-C

    # Restart (in-process, same database, no faulty extension): the run is recovered.
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, []))
    async with live_server(app) as live, live.client() as client:
        runs = (await client.get(f"/api/threads/{thread_id}/runs")).json()
        assert len(runs) == 1 and (run_id is None or runs[0]["run_id"] == run_id)
        assert (runs[0]["status"], runs[0]["outcome"]) == ("interrupted", "aborted"), runs[0]
        thread = (await client.get(f"/api/threads/{thread_id}")).json()
        assert thread["status"] == "interrupted"
        response = await client.post(f"/api/threads/{thread_id}/runs", json=run_body("again"))
        row = await wait_run(client, thread_id, response.json()["run_id"])
        assert row["status"] == "success"


def test_interrupt_in_service_start_stops_startup(tmp_path: Path, gateway_processes: list[GatewayProcess]) -> None:
    write_config(tmp_path / "config.yaml", [_entry("service_start")])
    with pytest.raises(RuntimeError, match=r"exited|did not start"):
        gateway_processes.append(start_gateway_process(tmp_path))


def test_interrupt_in_a_route_is_contained_by_uvicorn(tmp_path: Path, gateway_processes: list[GatewayProcess]) -> None:
    write_config(tmp_path / "config.yaml", [_entry("router")])
    gw = start_gateway_process(tmp_path)
    gateway_processes.append(gw)
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        try:
            assert client.get("/faulty/boom").status_code == 500
        except httpx.HTTPError:
            pass  # connection dropped
        time.sleep(0.3)
        if gw.proc.poll() is not None:
            pytest.fail(f"a KeyboardInterrupt in a route stopped the Gateway:\n{gw.output()[-2000:]}")
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/faulty/ok").json() == {"ok": "faulty"}
