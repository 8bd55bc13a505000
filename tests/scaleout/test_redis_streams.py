"""Streams across processes: two Gateway processes on one PostgreSQL and one Redis.

A run started on one process is joined, resumed after a dropped connection and cancelled
through the other, all with ``langgraph_sdk``; a cancel whose signal is lost (the owner's
listener is down at that moment) still stops the run, through the durable backstop.
Skipped, saying why, when PostgreSQL or Redis cannot be reached.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph_sdk import get_sync_client
from scaleout_cluster import Cluster, wait_for

from redis_support import REDIS_URL

pytestmark = pytest.mark.e2e


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
def pair(cluster_of: Any, redis_prefix: str, tmp_path: Path) -> tuple[Cluster, Path]:
    gates = tmp_path / "gates"
    gates.mkdir()
    cluster = cluster_of(
        2,
        extra_env={
            "DEERFLOW_REDIS_URL": REDIS_URL,
            "DEERFLOW_REDIS_PREFIX": redis_prefix,
            "DEERFLOW_SSE_HEARTBEAT_SECONDS": "0.5",
        },
        extra_plugins=({"name": "gate", "use": "sdk_gate_ext:install", "config": {"gate_dir": str(gates)}},),
    )
    return cluster, gates


def _clients(cluster: Cluster) -> tuple[Any, Any]:
    a, b = (get_sync_client(url=f"{g.base_url}/api", api_key=None) for g in cluster.gateways)
    return a, b


def _status(client: Any, thread_id: str, run_id: str) -> str:
    return str(client.runs.get(thread_id, run_id)["status"])


def _held_on_a(on_a: Any, on_b: Any, thread_id: str) -> str:
    """A run started on A that waits at a gate nobody opens; returns once B sees it running."""
    run = on_a.runs.create(thread_id, "lead_agent", input=human(f"held gate:g{uuid.uuid4().hex[:8]}"))
    run_id = str(run["run_id"])
    assert wait_for(lambda: _status(on_b, thread_id, run_id) == "running", 15)
    return run_id


def _watch(client: Any, thread_id: str, run_id: str) -> tuple[threading.Thread, list[Any]]:
    """Join the run's stream on a thread; the list fills as events arrive."""
    watched: list[Any] = []
    watcher = threading.Thread(target=lambda: watched.extend(client.runs.join_stream(thread_id, run_id)))
    watcher.start()
    return watcher, watched


def test_a_run_on_one_process_is_joined_and_resumed_through_the_other(pair: tuple[Cluster, Path]) -> None:
    cluster, gates = pair
    on_a, on_b = _clients(cluster)
    thread_id = on_a.threads.create()["thread_id"]
    gate = f"g{uuid.uuid4().hex[:8]}"
    modes = ["values", "custom"]
    stream = on_a.runs.stream(thread_id, "lead_agent", input=human(f"across gate:{gate}"), stream_mode=modes)
    seen_on_a: list[Any] = []
    for part in stream:
        seen_on_a.append(part)
        if part.event == "custom":
            break  # the connection to A drops while the run waits at the gate
    stream.close()
    run_id = seen_on_a[0].data["run_id"]
    assert cluster.gateways[0].base_url != cluster.gateways[1].base_url

    joined_on_b: list[Any] = []
    joiner = threading.Thread(target=lambda: joined_on_b.extend(on_b.runs.join_stream(thread_id, run_id)))
    joiner.start()
    assert wait_for(lambda: any(p.event == "custom" for p in joined_on_b), 15), "B did not replay A's events"
    (gates / gate).touch()
    resumed_on_b = list(on_b.runs.join_stream(thread_id, run_id, last_event_id=seen_on_a[-1].id))
    joiner.join(30)

    assert [p.id for p in seen_on_a + resumed_on_b] == [p.id for p in joined_on_b]
    assert [(p.event, p.data) for p in seen_on_a + resumed_on_b] == [(p.event, p.data) for p in joined_on_b]
    assert joined_on_b[0].event == "metadata" and joined_on_b[-1].event == "end"
    assert joined_on_b[-1].data["status"] == "success"
    assert on_b.runs.join(thread_id, run_id)["messages"][-1]["type"] == "ai"
    assert on_b.runs.get(thread_id, run_id)["status"] == "success"


def test_a_run_on_one_process_is_cancelled_through_the_other(pair: tuple[Cluster, Path]) -> None:
    cluster, _gates = pair
    on_a, on_b = _clients(cluster)
    thread_id = on_b.threads.create()["thread_id"]
    run_id = _held_on_a(on_a, on_b, thread_id)
    watcher, watched = _watch(on_b, thread_id, run_id)
    on_b.runs.cancel(thread_id, run_id, wait=True)
    watcher.join(30)
    record = on_a.runs.get(thread_id, run_id)
    assert (record["status"], record["outcome"]) == ("interrupted", "aborted")
    assert watched[-1].event == "end" and watched[-1].data["status"] == "interrupted"


def test_a_cancel_whose_signal_is_lost_still_stops_the_run(pair: tuple[Cluster, Path]) -> None:
    cluster, _gates = pair
    on_a, on_b = _clients(cluster)
    thread_id = on_a.threads.create()["thread_id"]
    run_id = _held_on_a(on_a, on_b, thread_id)
    admin = cluster.database_url
    with psycopg.connect(admin, autocommit=True) as conn:
        # Every LISTEN connection goes away: A hears no NOTIFY until it has reconnected.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        )
        on_b.runs.cancel(thread_id, run_id)
    assert wait_for(lambda: _status(on_b, thread_id, run_id) == "interrupted", 15)
    log = cluster.gateways[0].log()
    assert "stopped by a recorded interrupt request (its signal was missed)" in log, log[-3000:]


def test_a_reader_on_the_other_process_ends_when_the_owner_dies(pair: tuple[Cluster, Path]) -> None:
    """No ``end`` will ever come from a SIGKILLed owner: once the lease sweeper persisted the
    run as interrupted, the reader's stream ends with that status."""
    cluster, _gates = pair
    on_a, on_b = _clients(cluster)
    thread_id = on_b.threads.create()["thread_id"]
    watcher, watched = _watch(on_b, thread_id, _held_on_a(on_a, on_b, thread_id))
    assert wait_for(lambda: watched, 15)
    cluster.gateways[0].process.kill()
    watcher.join(30)
    assert not watcher.is_alive(), "the reader never ended"
    assert watched[0].event == "metadata" and watched[-1].event == "end"
    assert watched[-1].data["status"] == "interrupted"


def test_without_redis_another_process_says_how_to_share_streams(cluster_of: Any) -> None:
    from langgraph_sdk.errors import ConflictError

    cluster = cluster_of(2)
    on_a, on_b = _clients(cluster)
    thread_id = on_a.threads.create()["thread_id"]
    run = on_a.runs.create(thread_id, "lead_agent", input=human("slow:30 held on A"))
    assert wait_for(lambda: _status(on_b, thread_id, run["run_id"]) == "running", 15)
    with pytest.raises(ConflictError, match="DEERFLOW_REDIS_URL"):
        list(on_b.runs.join_stream(thread_id, run["run_id"]))
    on_b.runs.cancel(thread_id, run["run_id"], wait=True)  # cancel still crosses over (NOTIFY)
    assert _status(on_a, thread_id, run["run_id"]) == "interrupted"
