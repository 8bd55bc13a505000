"""SIGKILL while crons and webhooks are due: a ``deerflow-ext serve`` with two every-minute crons
(the cron clock accelerated: a minute per real second) and clients posting runs with a
``webhook``, killed at random moments (seeded) and started again on the same database, on
SQLite and on PostgreSQL. The receiver answers 500 to every fourth request, so retries are
in flight at the kills too.

Held after the last restart, once every run ended and the outbox has nothing pending:

- each tick fired one run at most (a tick is claimed before its run starts: README, "Crons");
- every run the database holds, killed ones included (startup recovery ends them
  ``interrupted``), has exactly one delivery owed, and that delivery reached the receiver
  with a valid signature: nothing lost;
- a delivery answered 200 more than once only where the receiver failed it before or a kill
  cut the attempt between the receiver's answer and its record (at-least-once): its first 200
  came before a kill and its next after it, with the same ``webhook-id`` for the receiver to
  dedupe on. One kill may cut several (a worker sends a claimed batch at once), so their
  number is reported, not bounded by the kills.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import pytest
from chaos_support import Gateway, all_final, figure, gateways, load_average, new_thread, scaled, wait_for, write_config

from deerflow_ext.webhooks import secret_bytes, verify
from pg_support import PG_UNREACHABLE, fresh_database
from webhooks.webhook_receiver import Receiver

pytestmark = pytest.mark.e2e

KILLS = scaled(4, 15)
SEED = 20261207
SECRET = "chaos-webhook-secret"
CLOCK_SCALE = 60.0


def _load(url: str, threads: list[str], hook: str, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            prompt = f"slow:{rng.choice([0, 0, 0.3, 1])} load"
            try:
                client.post(
                    f"/api/threads/{rng.choice(threads)}/runs",
                    json={
                        "input": {"messages": [{"role": "user", "content": prompt}]},
                        "multitask_strategy": "enqueue",
                        "webhook": hook,
                    },
                )
            except httpx.HTTPError:
                return  # the process is gone
            time.sleep(0.05)


def _all_runs(client: httpx.Client, threads: list[str]) -> list[tuple[str, str, dict]]:
    found = []
    for thread_id in threads:
        for run in client.get(f"/api/threads/{thread_id}/runs", params={"limit": 1000}).json():
            found.append((thread_id, run["run_id"], run))
    return found


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_kills_while_crons_and_webhooks_are_due_lose_nothing_and_fire_nothing_twice(
    tmp_path: Path, backend: str
) -> None:
    receiver = Receiver()
    receiver.fail_every = 4
    hook = receiver.url + "/hook"
    write_config(
        tmp_path,
        webhooks={
            "url": {"require_https": False, "disable_loopback": False},
            "backoff_seconds": 0.2,
            "max_backoff_seconds": 2,
            "max_attempts": 30,
            "timeout_seconds": 5,
        },
    )
    env = {
        "DEERFLOW_THREAD_LEASE_SECONDS": "2",
        "DEERFLOW_TEST_CRON_CLOCK": f"{time.time()}:{CLOCK_SCALE}",
        "DEERFLOW_WEBHOOK_SECRET": SECRET,
    }
    pg = None
    if backend == "postgres":
        if PG_UNREACHABLE:
            pytest.skip(PG_UNREACHABLE)
        pg = fresh_database("dfx_chaos")
        url = f"postgresql://postgres@127.0.0.1:5432/{pg.__enter__()}"
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}"
    rng = random.Random(SEED)
    kills: list[tuple[float, float]] = []  # (just before, just after) each SIGKILL
    try:
        with gateways() as started:
            gw = Gateway(tmp_path, url, env)
            started.append(gw)
            gw.start()
            with gw.client() as client:
                threads = [new_thread(client) for _ in range(4)]
                crons = []
                for thread_id in threads[:2]:
                    answer = client.post(
                        f"/api/threads/{thread_id}/runs/crons",
                        json={
                            "schedule": "* * * * *",
                            "input": {"messages": [{"role": "user", "content": "tick"}]},
                            "multitask_strategy": "enqueue",
                            "webhook": hook,
                        },
                    )
                    answer.raise_for_status()
                    crons.append(answer.json()["cron_id"])
            for kill in range(KILLS):
                stop = threading.Event()
                clients = [
                    threading.Thread(target=_load, args=(gw.url, threads, hook, stop, SEED + kill * 10 + i))
                    for i in range(2)
                ]
                for c in clients:
                    c.start()
                time.sleep(rng.uniform(1.0, 3.0))
                before = time.monotonic()
                gw.kill()
                kills.append((before, time.monotonic()))
                stop.set()
                for c in clients:
                    c.join(15)
                time.sleep(rng.uniform(0.0, 1.5))  # ticks come due while no Gateway runs
                gw.start()
            with gw.client() as client:
                for cron_id in crons:
                    client.delete(f"/api/runs/crons/{cron_id}").raise_for_status()
                runs = _all_runs(client, threads)
                rows = all_final(client, [(t, r) for t, r, _ in runs], 120)
                runs = _all_runs(client, threads)  # a tick may have fired before the deletes

                def drained() -> bool:
                    return client.get("/api/webhooks").json()["counts"]["pending"] == 0

                assert wait_for(drained, 120), client.get("/api/webhooks").json()["counts"]
                counts = client.get("/api/webhooks").json()["counts"]
            gw.stop()
    finally:
        receiver.close()
        if pg is not None:
            pg.__exit__(None, None, None)

    ticks = Counter(
        (run["metadata"]["cron_id"], run["metadata"]["cron_tick"]) for _, _, run in runs if "cron_id" in run["metadata"]
    )
    assert ticks and max(ticks.values()) == 1, [tick for tick, n in ticks.items() if n > 1]

    requests = receiver.at("/hook")
    now = int(time.time())
    unverified = [
        (r.headers.get("webhook-id"), r.headers.get("webhook-timestamp"), r.headers.get("content-length"), len(r.body))
        for r in requests
        if not verify(secret_bytes(SECRET), r.headers, r.body, now=now, tolerance=600)
    ]
    assert not unverified, (now, unverified[:5])
    ids_by_run: defaultdict[str, set[str]] = defaultdict(set)
    ok_by_id: Counter[str] = Counter()
    ok_at: defaultdict[str, list[float]] = defaultdict(list)
    failed_ids = set()
    for r in requests:
        ids_by_run[r.payload["run_id"]].add(r.delivery_id)
        if r.answered == 200:
            ok_by_id[r.delivery_id] += 1
            ok_at[r.delivery_id].append(r.at)
        else:
            failed_ids.add(r.delivery_id)
    statuses = Counter(row["status"] for row in rows.values())
    lost = [run_id for _, run_id, _ in runs if not any(ok_by_id[d] for d in ids_by_run.get(run_id, ()))]
    assert counts["failed"] == 0 and not lost, (counts, lost[:5])
    assert all(len(ids) == 1 for ids in ids_by_run.values()), "a run owed two deliveries"
    duplicated = [d for d, n in ok_by_id.items() if n > 1 and d not in failed_ids]

    def across_a_kill(delivery_id: str) -> bool:
        """Every repeated 200 of the delivery came after a kill that came after the one before."""
        pairs = itertools.pairwise(sorted(ok_at[delivery_id]))
        return all(any(one < after and before < then for before, after in kills) for one, then in pairs)

    assert all(across_a_kill(d) for d in duplicated), [d for d in duplicated if not across_a_kill(d)]
    assert statuses["interrupted"] > 0, "no run was in flight at any kill: the case did not test it"
    assert failed_ids, "the receiver failed no attempt: the case did not test retries"
    figure(
        f"kill_crons_webhooks[{backend}]",
        kills=KILLS,
        seed=SEED,
        runs=len(runs),
        statuses=dict(sorted(statuses.items())),
        ticks=len(ticks),
        ticks_fired_twice=0,
        deliveries=len(ok_by_id),
        attempts=len(requests),
        receiver_failures=len(requests) - sum(ok_by_id.values()),
        duplicates_after_kills=len(duplicated),
        lost=0,
        load=load_average(),
    )
