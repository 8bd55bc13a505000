"""Redis SIGKILLed and restarted under ``deerflow-ext serve --workers 2`` with streams open.

The Gateway shares run streams through a ``redis-server`` of the test's own (never the
machine's on 6379) and keeps its runs in PostgreSQL. Runs publish custom events every 20 ms;
each is followed over SSE through the Gateway's port (either worker may serve a stream and
either may run a run). Mid-stream Redis is killed with SIGKILL and, two seconds later,
started again, empty (no persistence).

Held: every stream ends with an ``end`` event — after a ``not_retained`` event where events
were lost with Redis — never a connection cut mid-response; every run is terminal and none
is lost; and afterwards both workers serve new runs whose streams are complete.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from chaos_support import (
    Gateway,
    all_final,
    figure,
    gateways,
    load_average,
    new_thread,
    parse_sse,
    scaled,
    start_run,
    write_config,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

STREAMS = scaled(16, 200)
TICKS = 150


def _follow(url: str, thread_id: str, run_id: str, out: dict[str, Any]) -> None:
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            response = client.get(f"/api/threads/{thread_id}/runs/{run_id}/stream")
            out[run_id] = parse_sse(response.text)
    except httpx.HTTPError as exc:
        out[run_id] = exc


def test_redis_killed_and_restarted_under_two_workers(
    tmp_path: Path, pg_url: str, own_redis: Any, redis_needed: None
) -> None:
    write_config(tmp_path)
    env = {
        "DEERFLOW_REDIS_URL": own_redis.url,
        "DEERFLOW_SSE_HEARTBEAT_SECONDS": "0.5",
        "DEERFLOW_THREAD_LEASE_SECONDS": "2",
    }
    streams: dict[str, Any] = {}
    with gateways() as started:
        gw = Gateway(tmp_path, pg_url, env, workers=2)
        started.append(gw.start(within=90))
        with gw.client() as client:
            runs = []
            for i in range(STREAMS):
                thread_id = new_thread(client)
                body_extra = {"stream_mode": ["custom"]}
                runs.append(
                    (thread_id, start_run(client, thread_id, f"slow:1 tick:{TICKS}:20 redis {i}", **body_extra))
                )
            readers = [threading.Thread(target=_follow, args=(gw.url, t, r, streams), daemon=True) for t, r in runs]
            for reader in readers:
                reader.start()
            time.sleep(2.0)  # mid-stream
            own_redis.kill()
            time.sleep(2.0)
            own_redis.start()
            for reader in readers:
                reader.join(120)
            rows = all_final(client, runs, 120)

            # Both processes recover: new runs, streamed to the end, on either worker.
            after = []
            for i in range(6):
                thread_id = new_thread(client)
                response = client.post(
                    f"/api/threads/{thread_id}/runs/stream",
                    json={"input": {"messages": [{"role": "user", "content": f"after {i}"}]}},
                )
                events = parse_sse(response.text)
                after.append(events[-1][0] if events else None)

    cut = {r: s for r, s in streams.items() if isinstance(s, Exception)}
    assert not cut, f"{len(cut)} stream(s) were cut mid-response: {list(cut.values())[:3]}"
    assert len(streams) == STREAMS
    unended = [r for r, events in streams.items() if not events or events[-1][0] != "end"]
    assert not unended, f"{len(unended)} stream(s) did not end with an end event"
    told = sum(any(name == "not_retained" for name, _, _ in events) for events in streams.values())
    statuses = sorted({row["status"] for row in rows.values()})
    assert set(statuses) <= {"success", "error", "interrupted"}, statuses
    assert after == ["end"] * 6, after
    figure(
        "redis_restart",
        workers=2,
        runs=STREAMS,
        streams=STREAMS,
        faults=1,
        streams_ended=STREAMS - len(unended),
        told_not_retained=told,
        run_statuses=statuses,
        after_restart_ok=len(after),
        lost=0,
        load=load_average(),
    )
