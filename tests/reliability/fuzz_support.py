"""Shared by the HTTP fuzz suites: what every answer must look like, a Gateway process for
a module, and the final check that every run it accepted ended and no thread was left busy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from conftest import start_gateway_process, write_config

__all__ = ["FuzzGateway", "check_answer", "fuzz_gateway"]

LIVE = ("pending", "running")


def check_answer(response: httpx.Response) -> None:
    """Never a 5xx; a refusal is JSON with one ``detail`` sentence."""
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/json"), response.text[:200]
        detail = response.json()["detail"]
        assert isinstance(detail, str) and detail, response.text[:200]


class FuzzGateway:
    def __init__(self, url: str, client: httpx.Client) -> None:
        self.url = url
        self.client = client

    def assert_settled(self, within: float = 60) -> int:
        """Every run of every thread is terminal (waiting up to ``within`` seconds) and no
        thread is busy; returns how many runs there were."""
        deadline = time.monotonic() + within
        while True:
            threads = self._all_threads()
            runs = [r for t in threads for r in self._runs(t["thread_id"])]
            live = [r for r in runs if r["status"] in LIVE]
            busy = [t for t in threads if t["status"] == "busy"]
            if not live and not busy:
                return len(runs)
            assert time.monotonic() < deadline, (
                f"{len(live)} run(s) never ended: {[(r['run_id'], r['status']) for r in live][:5]}; "
                f"busy threads: {[t['thread_id'] for t in busy][:5]}"
            )
            time.sleep(0.2)

    def _all_threads(self) -> list[dict[str, Any]]:
        threads: list[dict[str, Any]] = []
        while True:
            page = self.client.get("/api/threads", params={"limit": 1000, "offset": len(threads)})
            assert page.status_code == 200, page.text[:300]
            threads.extend(page.json())
            if len(page.json()) < 1000:
                return threads

    def _runs(self, thread_id: str) -> list[dict[str, Any]]:
        response = self.client.get(f"/api/threads/{thread_id}/runs", params={"limit": 1000})
        assert response.status_code == 200, (thread_id, response.status_code, response.text[:300])
        return list(response.json())


@contextmanager
def fuzz_gateway(directory: Path, **sections: Any) -> Iterator[FuzzGateway]:
    """``deerflow-ext serve`` with no extensions on a SQLite file in ``directory``, in its own
    process: nothing it does (its ``random`` use included) runs inside Hypothesis's draws."""
    write_config(directory / "config.yaml", [], **sections)
    gateway = start_gateway_process(directory, tag="fuzz")
    try:
        with httpx.Client(base_url=gateway.url, timeout=60) as client:
            yield FuzzGateway(gateway.url, client)
        assert gateway.proc.poll() is None, f"the Gateway exited:\n{gateway.output()[-3000:]}"
    finally:
        gateway.kill()
