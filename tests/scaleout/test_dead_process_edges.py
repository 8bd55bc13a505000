"""The two scale-out edges ``docs/SCALE-OUT.md`` used to list as not done.

* A ``pending`` run whose process died before it ever held its thread stayed ``pending``
  until that host restarted: no lease names it, so no takeover or sweep ever saw it. Each
  process now heartbeats in ``gateway_processes``; another process fails the pending runs of
  a process whose heartbeat expired, within the lease.
* ``DELETE /api/threads/{id}`` looked only at the receiving process's own runs, so a thread
  could be deleted from under a run executing in another process.
"""

from __future__ import annotations

import time

from scaleout_cluster import LEASE_SECONDS, Cluster, body, run_status, wait_done, wait_for

SLACK = 3.0  # scheduling, polling and process start-up on a loaded machine


def _thread(gateway) -> str:
    with gateway.client() as client:
        return client.post("/api/threads", json={}).json()["thread_id"]


def _start(gateway, thread_id: str, text: str) -> str:
    with gateway.client() as client:
        response = client.post(f"/api/threads/{thread_id}/runs", json=body(text))
        assert response.status_code == 200, response.text
        return response.json()["run_id"]


def _hooked(cluster: Cluster, what: str, run_id: str) -> bool:
    return any(h["what"] == what and h["run"] == run_id for h in cluster.hooks())


def test_a_pending_run_of_a_dead_process_is_failed_within_the_lease(cluster_of) -> None:
    cluster = cluster_of(2)
    a, b = cluster.gateways
    thread_id = _thread(b)
    # b's run holds the thread; interrupted by the follow-up, its on_task_stop takes ~2.5 s,
    # during which the follow-up (queued by a) waits for the thread: pending.
    holder = _start(b, thread_id, "slow:30 slowstop:2.5")
    assert wait_for(lambda: _hooked(cluster, "start", holder), 15), "the holder never started"
    queued = _start(a, thread_id, "queued behind the holder")
    assert run_status(b, thread_id, queued)["status"] == "pending"
    a.process.kill()
    a.process.wait(5)
    killed_at = time.monotonic()

    run = wait_for(
        lambda: (r := run_status(b, thread_id, queued))["status"] != "pending" and r, LEASE_SECONDS + 2 * SLACK
    )
    assert run, f"the dead process's pending run is still pending: {run_status(b, thread_id, queued)}"
    assert (run["status"], run["outcome"], run["started_at"]) == ("interrupted", "aborted", None), run
    assert "stopped" in run["error"], run
    assert time.monotonic() - killed_at <= LEASE_SECONDS + 2 * SLACK
    assert not _hooked(cluster, "start", queued)  # it never started: no hooks
    # The thread is usable again from the surviving process.
    follow = _start(b, thread_id, "after the crash")
    assert wait_done(b, thread_id, follow)["status"] == "success"


def test_delete_refuses_a_thread_with_a_run_in_another_process(cluster_of) -> None:
    cluster = cluster_of(2)
    a, b = cluster.gateways
    thread_id = _thread(a)
    run_id = _start(a, thread_id, "slow:20 then answer")
    assert wait_for(lambda: _hooked(cluster, "start", run_id), 15)
    with b.client() as client:
        refused = client.delete(f"/api/threads/{thread_id}")
        assert refused.status_code == 409, refused.text
        assert "run in progress" in refused.json()["detail"]
        assert client.get(f"/api/threads/{thread_id}").status_code == 200
        assert client.post(f"/api/threads/{thread_id}/runs/{run_id}/cancel").status_code == 202
    wait_done(b, thread_id, run_id, timeout=15)
    assert wait_for(lambda: _hooked(cluster, "stop", run_id), 10)
    with b.client() as client:
        assert wait_for(lambda: client.delete(f"/api/threads/{thread_id}").status_code == 204, 10)
        assert client.get(f"/api/threads/{thread_id}").status_code == 404
