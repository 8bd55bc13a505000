"""Concurrent writers of ``extensions_config.json``: the command line and the HTTP API at once.

``WRITERS`` command-line processes each enable a skill of their own (``deerflow-ext
extensions skill enable c<i>``) while ``WRITERS`` HTTP clients each add one of their own by
read-modify-write (``GET``, add, ``PUT`` with ``If-Match``; a 412 means another writer got
there first: read again and retry), and a reader keeps reading the file from disk and
through the API.

Held: every read parses (no torn file); every writer's skill is in the final file (no lost
update); the losers of a race got 412 naming the revisions, never a silent overwrite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from chaos_support import SRC, Gateway, figure, gateways, load_average, scaled, write_config

pytestmark = pytest.mark.e2e

WRITERS = scaled(20, 100)


def _cli_writer(directory: Path, i: int) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    env["PYTHONPATH"] = str(SRC)
    command = [sys.executable, "-m", "deerflow_ext.cli", "extensions", "skill", "enable", f"c{i}"]
    done = subprocess.run(
        [*command, "--config", str(directory / "config.yaml")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.returncode


def _http_writer(url: str, i: int) -> int:
    """Adds skill ``h<i>``; returns how many times it lost a race (412)."""
    lost = 0
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(200):
            current = client.get("/api/extensions-config")
            document = current.json()
            document["skills"][f"h{i}"] = {"enabled": True}
            saved = client.put("/api/extensions-config", json=document, headers={"If-Match": current.headers["ETag"]})
            if saved.status_code == 200:
                return lost
            assert saved.status_code == 412, saved.text
            assert "changed since revision" in saved.json()["detail"]
            lost += 1
    raise AssertionError(f"HTTP writer {i} lost 200 races in a row")


def test_concurrent_cli_and_http_writers(tmp_path: Path) -> None:
    write_config(tmp_path)
    path = tmp_path / "extensions_config.json"
    torn: list[str] = []
    reads = 0
    with gateways() as started:
        gw = Gateway(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}", {})
        started.append(gw.start())
        stop = threading.Event()

        def reader() -> None:
            nonlocal reads
            with httpx.Client(base_url=gw.url, timeout=60) as client:
                while not stop.is_set():
                    if path.exists():
                        try:
                            json.loads(path.read_text())
                        except ValueError as exc:
                            torn.append(f"disk: {exc}")
                    response = client.get("/api/extensions-config")
                    if response.status_code != 200:
                        torn.append(f"api: {response.status_code} {response.text[:200]}")
                    reads += 1
                    stop.wait(0.02)

        watcher = threading.Thread(target=reader, daemon=True)
        watcher.start()
        with ThreadPoolExecutor(max_workers=12) as pool:
            cli = [pool.submit(_cli_writer, tmp_path, i) for i in range(WRITERS)]
            http = [pool.submit(_http_writer, gw.url, i) for i in range(WRITERS)]
            losses = sum(f.result() for f in http)
            for f in cli:
                f.result()
        stop.set()
        watcher.join(30)

    skills = json.loads(path.read_text())["skills"]
    expected = {f"c{i}" for i in range(WRITERS)} | {f"h{i}" for i in range(WRITERS)}
    assert not torn, torn[:5]
    assert expected <= set(skills), f"lost updates: {sorted(expected - set(skills))[:10]}"
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "extensions_config.json.lock").exists()
    figure(
        "config_writers",
        cli_writers=WRITERS,
        http_writers=WRITERS,
        reads=reads,
        torn=0,
        http_412_retries=losses,
        skills_in_file=len(skills),
        lost=0,
        load=load_average(),
    )
