"""Hostile extensions next to a well-behaved one, in one ``deerflow-ext serve`` (SQLite).

Loaded together (``chaos_ext``): a middleware allocating a large block (``hog``), one calling
``time.sleep`` on the event loop (``blocker``), lifecycle and system-model observers that
recurse past the interpreter's limit (``recursor``), a router streaming 50 MiB
(``big_router``), an ``install()`` that monkeypatches a host function (``patcher``) and a
route writing to the host's ``runs`` table (``table_writer``), next to ``chaos`` which logs
every run's start and stop.

What the host contains, and this case checks: the allocation, the blocking call and the
recursion cost their own runs nothing but time (every run succeeds); the blocking call is
named in the log by the event-loop watchdog; the recursion is one attributed failure line
per call; the 50 MiB body is streamed (RSS grows by far less) while ``/health`` answers; the
well-behaved extension sees the start and the stop of every run. What it cannot contain
(README, "Trust model"), and this case pins so the documentation stays true: the patch is
in effect (``/api/info`` reports the patched version), the forged outcome is what the API
returns. ``os._exit`` from an extension ends the process (docs/RELIABILITY.md) and is not
exercised here; a kill is, in ``test_kill_loops``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from chaos_support import (
    Gateway,
    all_final,
    figure,
    gateways,
    load_average,
    new_thread,
    proc_rss_kib,
    scaled,
    start_run,
    write_config,
)

pytestmark = pytest.mark.e2e

HOG_MIB = scaled(256, 1024)
MEMORY_WATCH_MIB = 300  # a served Gateway holds ~160 MiB here; the hog takes it past this
BLOCK_SECONDS = scaled(2, 30)
BIG_MIB = 50
RUNS = scaled(24, 200)

HOSTILE = [
    {"name": "hog", "use": "chaos_ext:install_hog"},
    {"name": "blocker", "use": "chaos_ext:install_blocker"},
    {"name": "recursor", "use": "chaos_ext:install_recursor"},
    {"name": "big_router", "use": "chaos_ext:install_big_router"},
    {"name": "patcher", "use": "chaos_ext:install_patcher"},
    {"name": "table_writer", "use": "chaos_ext:install_table_writer"},
]


def test_hostile_extensions_next_to_a_well_behaved_one(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    write_config(tmp_path, HOSTILE)
    # The well-behaved extension logs to the ledger (its entry is first in the config).
    document = json.loads((tmp_path / "config.yaml").read_text())
    document["plugins"][0]["config"] = {"log": str(ledger)}
    (tmp_path / "config.yaml").write_text(json.dumps(document))
    with gateways() as started:
        env = {"DEERFLOW_LOG_LEVEL": "INFO", "DEERFLOW_MEMORY_WATCH_MIB": str(MEMORY_WATCH_MIB)}
        gw = Gateway(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}", env)
        started.append(gw.start())
        with gw.client(timeout=120) as client:
            assert client.get("/health").json()["status"] == "ok"
            base_rss = proc_rss_kib(gw.pid)
            peaks = [base_rss]
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.is_set():
                    peaks.append(proc_rss_kib(gw.pid))
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            prompts = ["plain"] * (RUNS - 2) + [f"hog:{HOG_MIB}", f"block:{BLOCK_SECONDS}"]
            runs = []
            for i, prompt in enumerate(prompts):
                thread_id = new_thread(client)
                runs.append((thread_id, start_run(client, thread_id, f"{prompt} {i}")))
            rows = all_final(client, runs, 180)
            sampling.set()
            sampler.join(10)
            peak = max(peaks)
            after_runs_rss = proc_rss_kib(gw.pid)

            # 50 MiB streamed by an extension's route while /health is polled.
            health: Counter[str] = Counter()
            stop = threading.Event()

            def poll() -> None:
                with httpx.Client(base_url=gw.url, timeout=30) as poller:
                    while not stop.is_set():
                        health[str(poller.get("/health").status_code)] += 1
                        time.sleep(0.1)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            big_rss = proc_rss_kib(gw.pid)
            received = 0
            with client.stream("GET", f"/chaos/big?mib={BIG_MIB}") as response:
                for chunk in response.iter_bytes():
                    received += len(chunk)
                    big_rss = max(big_rss, proc_rss_kib(gw.pid))
            stop.set()
            poller.join(10)
            big_growth = big_rss - after_runs_rss

            info_version = client.get("/api/info").json()["version"]
            forged_run = runs[0]
            assert client.post(f"/chaos/forge/{forged_run[1]}").json() == {"rows": 1}
            forged = client.get(f"/api/threads/{forged_run[0]}/runs/{forged_run[1]}").json()["outcome"]
        log = gw.log()

    statuses = Counter(row["status"] for row in rows.values())
    assert statuses == Counter({"success": RUNS}), statuses
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    seen = Counter((e["run"], e["what"]) for e in events)
    assert all(seen[(run_id, "start")] == 1 and seen[(run_id, "stop")] == 1 for _, run_id in runs), seen
    assert "blocker" in log and "blocking the event loop" in log, "the watchdog did not name the blocking hook"
    # Every hook running or awaiting at the sample is named (the blocker may be blocking the
    # loop at that moment); the hog holding the memory must be among them.
    named = [line for line in log.splitlines() if "when the Gateway's memory reached" in line]
    assert any("install_hog" in line for line in named), f"the memory watchdog did not name the hog: {named}"
    assert "recursor" in log and "RecursionError" in log, "the recursion was not attributed"
    assert received == BIG_MIB << 20
    assert big_growth < (BIG_MIB << 10) // 2, f"RSS grew {big_growth} KiB while streaming {BIG_MIB} MiB"
    assert set(health) == {"200"}, health
    # Not containable in-process (README, "Trust model"): pinned so the docs stay true.
    assert info_version == "patched-by-extension"
    assert forged == "forged"
    figure(
        "hostile_extensions",
        runs=RUNS,
        hostile=len(HOSTILE),
        run_statuses=dict(statuses),
        hog_mib=HOG_MIB,
        rss_peak_growth_mib=round((peak - base_rss) / 1024),
        rss_after_runs_mib=round(after_runs_rss / 1024),
        blocked_s=BLOCK_SECONDS,
        watchdog_named="blocker",
        memory_watch_mib=MEMORY_WATCH_MIB,
        memory_named="hog",
        big_body_mib=BIG_MIB,
        big_body_rss_growth_mib=round(big_growth / 1024, 1),
        health_polls=sum(health.values()),
        uncontained=["monkeypatch", "table write", "os._exit"],
        lost=0,
        load=load_average(),
    )
