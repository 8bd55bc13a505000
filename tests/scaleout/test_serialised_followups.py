"""Two Gateway processes, one thread, 50 follow-up runs sent alternately to each.

The per-thread guarantees must hold across processes: the runs are serialised (each run's
``on_task_stop`` precedes the next run's ``on_task_start``, on one wall clock shared by
both processes through the hook log), no run is lost, and the thread's history — the
LangGraph checkpoint in the shared database — holds every question and every answer.
"""

from __future__ import annotations

import itertools

from scaleout_cluster import Cluster, body, checkpoint_messages, wait_done, wait_for

RUNS = 50


def test_fifty_followups_alternating_between_two_processes_are_serialised(cluster_of) -> None:
    cluster: Cluster = cluster_of(2)
    a, b = cluster.gateways
    with a.client() as client:
        thread_id = client.post("/api/threads", json={}).json()["thread_id"]

    run_ids: list[str] = []
    served_by: list[str] = []
    for i in range(RUNS):
        gateway = cluster.gateways[i % 2]
        with gateway.client() as client:
            response = client.post(f"/api/threads/{thread_id}/runs", json=body(f"question {i}"))
            assert response.status_code == 200, response.text
            run_ids.append(response.json()["run_id"])
            served_by.append(gateway.name)
        # Follow-up: sequential, and status asked of the *other* process on purpose.
        run = wait_done(cluster.gateways[(i + 1) % 2], thread_id, run_ids[-1])
        assert run["status"] == "success", run

    # A run's status is persisted before its on_task_stop (spec, lead-run timing steps 4 and
    # 5), so the last run can read "success" a moment before its stop hook has written.
    last = run_ids[-1]
    assert wait_for(lambda: any(h["run"] == last and h["what"] == "stop" for h in cluster.hooks()), 10.0)
    hooks = cluster.hooks()
    starts = {h["run"]: h for h in hooks if h["what"] == "start"}
    stops = {h["run"]: h for h in hooks if h["what"] == "stop"}
    assert set(starts) == set(stops) == set(run_ids), "a run lost a hook"
    assert {starts[r]["pid"] for r in run_ids} == {a.process.pid, b.process.pid}, "both processes executed runs"
    for previous, following in itertools.pairwise(run_ids):
        assert stops[previous]["t"] <= starts[following]["t"], (previous, following)
    # No two runs ever overlap: sort every hook by time and check they strictly alternate.
    ordered = sorted(hooks, key=lambda h: h["t"])
    assert [h["what"] for h in ordered] == ["start", "stop"] * RUNS
    assert [h["run"] for h in ordered[::2]] == run_ids

    with a.client() as client:
        listed = client.get(f"/api/threads/{thread_id}/runs", params={"limit": 1000}).json()
    assert sorted(r["run_id"] for r in listed) == sorted(run_ids)
    assert all(r["status"] == "success" for r in listed)

    messages = checkpoint_messages(cluster.database_url, thread_id)
    humans = [m.content for m in messages if m.type == "human"]
    assert humans == [f"question {i}" for i in range(RUNS)], "thread history incomplete or out of order"
    assert sum(1 for m in messages if m.type == "ai") >= RUNS
