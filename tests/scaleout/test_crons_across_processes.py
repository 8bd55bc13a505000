"""Two Gateway processes on one PostgreSQL, and one Gateway with ``--workers 2``, fire each
cron tick exactly once.

Ten minutes of every-minute ticks, accelerated for real: both processes run their cron clock
120 times faster from the same epoch (``DEERFLOW_TEST_CRON_CLOCK``), so they agree on which
tick is due and race for it at every tick. Two crons, both created through the first
process: the second, which had no cron at its start, is woken by PostgreSQL NOTIFY, and from
then on both claim both crons at every tick; the runs' ``cron_tick`` metadata says which
tick each run fired for, and each process's log which ticks it claimed.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from langgraph_sdk import get_sync_client
from scaleout_cluster import Cluster

SCALE = 120.0
VIRTUAL_MINUTES = 10


def _runs(client: Any, thread_id: str, cron_id: str) -> list[dict[str, Any]]:
    return [r for r in client.runs.list(thread_id, limit=1000) if r["metadata"].get("cron_id") == cron_id]


def _ticks(client: Any, thread_id: str, cron_id: str) -> list[datetime]:
    return [datetime.fromisoformat(r["metadata"]["cron_tick"]) for r in _runs(client, thread_id, cron_id)]


def _started_by_hooks(cluster: Cluster, client: Any, crons: list[tuple[str, str]]) -> dict[str, int]:
    """Each cron run's ``on_task_start`` was called (a cron's run is a run to extensions);
    the pid that called it, by run."""
    started = {h["run"]: h["pid"] for h in cluster.hooks() if h["what"] == "start"}
    runs = [r["run_id"] for thread, cron_id in crons for r in _runs(client, thread, cron_id)]
    missing = [r for r in runs if r not in started]
    assert missing == [], f"runs no extension saw start: {missing}"
    return {r: started[r] for r in runs}


def _tick_for_ten_minutes(client: Any) -> list[tuple[str, str]]:
    """Two every-minute crons created through ``client``, ten virtual minutes of their ticks,
    then deleted; their (thread, cron) ids."""
    crons = []
    for _ in range(2):
        thread = client.threads.create()["thread_id"]
        cron = client.crons.create_for_thread(
            thread,
            "lead_agent",
            schedule="* * * * *",
            input={"messages": [{"role": "user", "content": "tick"}]},
            multitask_strategy="enqueue",
        )
        crons.append((thread, cron["cron_id"]))
    time.sleep(VIRTUAL_MINUTES * 60 / SCALE)
    for _, cron_id in crons:
        client.crons.delete(cron_id)
    time.sleep(2 * 60 / SCALE)  # ticks claimed before the deletes start their runs
    return crons


def _each_tick_once(client: Any, crons: list[tuple[str, str]]) -> int:
    """Every tick of every cron has one run, none is skipped; how many runs in all."""
    total = 0
    for thread, cron_id in crons:
        ticks = sorted(_ticks(client, thread, cron_id))
        twice = [t for t, n in Counter(ticks).items() if n > 1]
        assert twice == [], f"ticks fired more than once: {twice}"
        assert len(ticks) >= VIRTUAL_MINUTES - 2, ticks
        gaps = [b for a, b in itertools.pairwise(ticks) if b - a != timedelta(minutes=1)]
        assert gaps == [], f"ticks skipped before {gaps}"
        total += len(ticks)
    return total


def test_two_gateways_fire_each_tick_of_each_cron_exactly_once(cluster_of: Callable[..., Cluster]) -> None:
    epoch = time.time()
    cluster = cluster_of(2, extra_env={"DEERFLOW_TEST_CRON_CLOCK": f"{epoch}:{SCALE}"})
    clients = [get_sync_client(url=f"{g.base_url}/api", api_key=None) for g in cluster.gateways]
    # Both crons through the first process: the second, which found no cron at its start,
    # learns of them through the run-signal channel (NOTIFY in the create's transaction).
    crons = _tick_for_ten_minutes(clients[0])
    total = _each_tick_once(clients[1], crons)
    fired = [g.log().count("fires its tick") for g in cluster.gateways]
    assert sum(fired) == total, (fired, total)
    assert fired[1] > 0, f"the second process never claimed a tick: {fired}"
    _started_by_hooks(cluster, clients[0], crons)
    print(f"ticks fired per process: {fired}")


def test_workers_2_fire_each_tick_of_each_cron_exactly_once(cluster_of: Callable[..., Cluster]) -> None:
    epoch = time.time()
    cluster = cluster_of(1, extra_env={"DEERFLOW_TEST_CRON_CLOCK": f"{epoch}:{SCALE}"}, extra_args=("--workers", "2"))
    client = get_sync_client(url=f"{cluster.gateways[0].base_url}/api", api_key=None)
    crons = _tick_for_ten_minutes(client)
    total = _each_tick_once(client, crons)
    assert cluster.gateways[0].log().count("fires its tick") == total
    pids = Counter(_started_by_hooks(cluster, client, crons).values())
    print(f"cron runs per worker pid: {dict(pids)}")
