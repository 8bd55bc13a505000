"""A stateless run's thread goes after the last run on it (issue 54, row 11).

The thread of ``POST /api/runs`` is named in ``Content-Location``; a client may post another
run on it. ``on_completion: delete`` (the default) still holds: the thread is deleted once
that run ended too, instead of being left forever because a run held it when the first
run's deletion came.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from gw_fixtures import FakeAgentHost

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import create_app


def _body(text: str, **extra: object) -> dict[str, object]:
    return {"input": {"messages": [{"role": "user", "content": text}]}, **extra}


async def _ended(client, thread_id: str, run_id: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        answer = await client.get(f"/api/threads/{thread_id}/runs/{run_id}")
        if answer.status_code == 404 or answer.json()["status"] not in ("pending", "running"):
            return "gone" if answer.status_code == 404 else answer.json()["status"]
        assert time.monotonic() < deadline, "the run did not end"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("strategy", ["enqueue", "interrupt"])
async def test_a_stateless_threads_second_run_ends_before_the_thread_goes(settings_for, strategy: str) -> None:
    host = FakeAgentHost(delay=1.0)
    app = create_app(settings_for(), config=AppConfig(), agent_host_factory=lambda c, k: host)
    async with live_server(app) as server, server.client() as client:
        first = (await client.post("/api/runs", json=_body("slow one"))).json()
        thread_id = first["thread_id"]
        second = await client.post(
            f"/api/threads/{thread_id}/runs", json=_body("slow two", multitask_strategy=strategy)
        )
        assert second.status_code == 200, second.text
        # The thread outlives the first run: the second holds it.
        await _ended(client, thread_id, first["run_id"])
        assert (await client.get(f"/api/threads/{thread_id}")).status_code == 200
        await _ended(client, thread_id, second.json()["run_id"])
        deadline = time.monotonic() + 30
        while (await client.get(f"/api/threads/{thread_id}")).status_code != 404:
            assert time.monotonic() < deadline, "the stateless run's thread was never deleted"
            await asyncio.sleep(0.05)
        if strategy == "enqueue":  # an interrupted first run may end before its agent was called
            assert [call[0].messages[-1]["content"] for call in host.calls] == ["slow one", "slow two"]
