"""Crash safety and cross-process control with two Gateway processes on one database.

* SIGKILL the process running a slow run: the other takes the thread over within the
  lease bound and the killed run is persisted as ``interrupted`` (even with no follow-up:
  the lease sweeper does it).
* SIGSTOP instead — a holder whose TCP connection lingers, like a vanished host: the lock
  is *not* released by PostgreSQL, so only the lease can hand the thread over.
* Cancel sent to the process that does not own the run stops it; a follow-up sent to the
  other process interrupts it the same way.
"""

from __future__ import annotations

import os
import signal
import time

from scaleout_cluster import LEASE_SECONDS, Cluster, body, run_status, wait_done, wait_for

SLACK = 3.0  # scheduling, polling and process start-up on a loaded CI machine


def _start(gateway, thread_id: str, text: str) -> str:
    with gateway.client() as client:
        response = client.post(f"/api/threads/{thread_id}/runs", json=body(text))
        assert response.status_code == 200, response.text
        return response.json()["run_id"]


def _thread(gateway) -> str:
    with gateway.client() as client:
        return client.post("/api/threads", json={}).json()["thread_id"]


def _started(cluster: Cluster, run_id: str) -> bool:
    return any(h["what"] == "start" and h["run"] == run_id for h in cluster.hooks())


def test_sigkill_mid_run_other_process_takes_over_and_run_is_interrupted(cluster_of) -> None:
    cluster = cluster_of(2)
    a, b = cluster.gateways
    thread_id = _thread(b)
    doomed = _start(a, thread_id, "slow:30 then answer")
    assert wait_for(lambda: _started(cluster, doomed), 15), "the slow run never started"
    a.process.kill()
    a.process.wait(5)
    killed_at = time.monotonic()

    # No follow-up yet: the sweeper alone persists the killed run as interrupted.
    run = wait_for(
        lambda: (r := run_status(b, thread_id, doomed))["status"] == "interrupted" and r, LEASE_SECONDS + SLACK
    )
    assert run, run_status(b, thread_id, doomed)
    assert run["outcome"] == "aborted"
    swept_after = time.monotonic() - killed_at

    follow = _start(b, thread_id, "after the crash")
    assert wait_done(b, thread_id, follow)["status"] == "success"
    assert time.monotonic() - killed_at <= LEASE_SECONDS + 2 * SLACK, "takeover exceeded the lease bound"
    with b.client() as client:
        assert client.get(f"/api/threads/{thread_id}").json()["status"] == "idle"
    assert swept_after <= LEASE_SECONDS + SLACK


def test_frozen_holder_with_lingering_connection_loses_the_thread_at_lease_expiry(cluster_of) -> None:
    cluster = cluster_of(2)
    a, b = cluster.gateways
    thread_id = _thread(a)
    frozen = _start(a, thread_id, "slow:30 then answer")
    assert wait_for(lambda: _started(cluster, frozen), 15)
    os.kill(a.process.pid, signal.SIGSTOP)  # its sockets stay open: PostgreSQL keeps its lock
    try:
        stopped_at = time.monotonic()
        follow = _start(b, thread_id, "while the holder is frozen")
        assert wait_for(lambda: _started(cluster, follow), LEASE_SECONDS + SLACK), "no takeover within the lease"
        took = time.monotonic() - stopped_at
        assert took >= LEASE_SECONDS * 0.5, f"taken over after {took:.2f}s: before the lease could expire"
        assert wait_done(b, thread_id, follow)["status"] == "success"
        assert run_status(b, thread_id, frozen)["status"] == "interrupted"
        assert "taken over" in b.log() or "terminating that session" in b.log()
    finally:
        a.process.kill()  # SIGKILL is delivered to a stopped process too
        a.process.wait(5)


def test_cancel_sent_to_the_process_that_does_not_own_the_run(cluster_of) -> None:
    cluster = cluster_of(2)
    a, b = cluster.gateways
    thread_id = _thread(a)
    run_id = _start(a, thread_id, "slow:20 then answer")
    assert wait_for(lambda: _started(cluster, run_id), 15)
    sent = time.monotonic()
    with b.client() as client:
        response = client.post(f"/api/threads/{thread_id}/runs/{run_id}/cancel")
    assert response.status_code == 202, response.text
    run = wait_done(b, thread_id, run_id, timeout=10)
    assert (run["status"], run["outcome"]) == ("interrupted", "aborted")
    assert time.monotonic() - sent < 5, "cancel did not reach the owner promptly"

    # The status is persisted just before on_task_stop runs (lead-run timing, steps 4 and 5).
    def stops() -> list[dict[str, object]]:
        return [h for h in cluster.hooks() if h["what"] == "stop" and h["run"] == run_id]

    assert wait_for(stops, 10)
    assert [h["outcome"] for h in stops()] == ["aborted"] and stops()[0]["pid"] == a.process.pid


def test_followup_on_another_process_interrupts_the_running_run(cluster_of) -> None:
    cluster = cluster_of(2)
    a, b = cluster.gateways
    thread_id = _thread(a)
    first = _start(a, thread_id, "slow:20 then answer")
    assert wait_for(lambda: _started(cluster, first), 15)
    sent = time.monotonic()
    second = _start(b, thread_id, "the newer question")
    assert wait_done(b, thread_id, second, timeout=15)["status"] == "success"
    assert time.monotonic() - sent < 8
    assert run_status(a, thread_id, first)["status"] == "interrupted"
    hooks = {(h["what"], h["run"]): h for h in cluster.hooks()}
    assert hooks[("stop", first)]["t"] <= hooks[("start", second)]["t"]
