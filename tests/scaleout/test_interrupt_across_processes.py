"""A run paused by a human-in-the-loop middleware in one Gateway process is resumed through
the other: the pause lives in the shared database (checkpoint and run rows), not in a process."""

from __future__ import annotations

import os
from pathlib import Path

from langgraph_sdk import get_sync_client
from scaleout_cluster import SRC, Cluster

HERE = Path(__file__).resolve().parent
HITL = {"name": "hitl", "use": "platform_api.hitl_ext:install"}
PATHS = os.pathsep.join([str(SRC), str(HERE), str(HERE.parent / "gateway"), str(HERE.parent)])


def test_a_pause_in_one_process_is_resumed_by_the_other(cluster_of) -> None:
    cluster: Cluster = cluster_of(2, extra_env={"PYTHONPATH": PATHS}, extra_plugins=(HITL,))
    first, second = (get_sync_client(url=f"{g.base_url}/api", api_key=None) for g in cluster.gateways)
    thread = first.threads.create()["thread_id"]
    paused = first.runs.wait(thread, "lead_agent", input={"messages": [{"role": "user", "content": "delegate: a"}]})
    assert paused["__interrupt__"][0]["value"]["action_requests"][0]["name"] == "task"
    assert second.threads.get(thread)["status"] == "interrupted"

    done = second.runs.wait(thread, "lead_agent", command={"resume": {"decisions": [{"type": "approve"}]}})
    assert [m["type"] for m in done["messages"]].count("tool") == 1
    assert first.threads.get(thread)["status"] == "idle"
    assert sorted(r["status"] for r in first.runs.list(thread)) == ["interrupted", "success"]
