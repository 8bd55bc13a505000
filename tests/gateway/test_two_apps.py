"""Two Gateway apps in one process, with different extension sets, served at once: each sees
only its own extensions and its own diagnostics.

The same extension is installed in both, with ``config: {tag: a}`` in one and ``{tag: b}``
in the other, so every call it records names the instance that made it. App ``b`` is created
last: it owns the process-wide set (the spec's fallback for callers publishing nothing),
which is exactly what app ``a`` must never read — not for its runs, not for the subagents
they delegate to, not for its thread-state graph, not for its diagnostics.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.config.settings import Settings
from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions
from deerflow_ext.gateway import create_app

ext = importlib.import_module("gateway.two_apps_ext")  # the loader's copy of the module

PROMPTS = {
    "a": ["a-1 hello", "delegate: a-2 count the deer", "a-3 FAIL", "a-4 again"],
    "b": ["b-1 hello", "delegate: b-2 count the deer", "b-3 FAIL", "b-4 FAIL", "delegate: b-5 the rest"],
}


@pytest.fixture(autouse=True)
def _restore_process_state() -> Iterator[None]:
    previous = get_loaded_extensions()
    ext.SEEN.clear()
    yield
    ext.SEEN.clear()
    set_loaded_extensions(previous)


def _app(tmp_path: Path, tag: str) -> Any:
    directory = tmp_path / tag
    directory.mkdir()
    config = AppConfig.model_validate(
        {"plugins": [{"name": f"two-{tag}", "use": "gateway.two_apps_ext:install", "config": {"tag": tag}}]}
    )
    settings = Settings(config=directory / "config.yaml", database_url=f"sqlite+aiosqlite:///{directory / 'db.sqlite'}")
    return create_app(settings, config=config)


async def _run(client: Any, prompt: str) -> tuple[str, str, dict[str, Any]]:
    thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": prompt}]}}
    run_id = (await client.post(f"/api/threads/{thread_id}/runs", json=body)).json()["run_id"]
    await client.get(f"/api/threads/{thread_id}/runs/{run_id}/join")
    return thread_id, run_id, (await client.get(f"/api/threads/{thread_id}/runs/{run_id}")).json()


async def test_two_apps_driven_at_once_each_see_only_their_own_extensions_and_diagnostics(tmp_path: Path) -> None:
    apps = {tag: _app(tmp_path, tag) for tag in ("a", "b")}
    assert get_loaded_extensions() is apps["b"].state.extensions, "the last app published the process-wide set"
    ext.SEEN.clear()  # construction contributes nothing yet; start from the runs

    async with live_server(apps["a"]) as server_a, live_server(apps["b"]) as server_b:
        async with server_a.client() as client_a, server_b.client() as client_b:
            clients = {"a": client_a, "b": client_b}
            # The thread-state graph is built outside any run (on first use): from the app's
            # own snapshot, not the process-wide set app "b" published.
            thread_a = (await client_a.post("/api/threads", json={})).json()["thread_id"]
            assert (await client_a.get(f"/api/threads/{thread_a}/state")).status_code == 200
            assert {tag for tag, what, _ in ext.SEEN if what.startswith("contribute")} == {"a"}
            ext.SEEN.clear()

            results = await asyncio.gather(
                *(_run(clients[tag], prompt) for tag in ("a", "b") for prompt in PROMPTS[tag])
            )
            owner = {}
            for (_thread, run_id, run), (tag, prompt) in zip(
                results, [(t, p) for t in ("a", "b") for p in PROMPTS[t]], strict=True
            ):
                assert run["status"] == "success", (prompt, run)
                owner[run_id] = tag

            # Every lifecycle call, lead and subagent, came from the instance of the run's app.
            lifecycle = [(tag, what, run_id) for tag, what, run_id in ext.SEEN if what.startswith(("start", "stop"))]
            assert {what for _, what, _ in lifecycle} == {"start:lead", "stop:lead", "start:subagent", "stop:subagent"}
            assert all(owner[run_id] == tag for tag, _, run_id in lifecycle), lifecycle
            # Every model call a middleware saw, lead and subagent, was its own app's.
            models = [(tag, what, mark) for tag, what, mark in ext.SEEN if what.startswith("model:")]
            assert {what for _, what, _ in models} == {"model:lead", "model:subagent"}
            assert all(mark.startswith(f"{tag}-") for tag, _, mark in models), models

            # Routers: each app serves its own instance's, not the other's.
            assert (await client_a.get("/api/ext/two-apps-a/runs")).json() == {"tag": "a"}
            assert (await client_a.get("/api/ext/two-apps-b/runs")).status_code == 404
            assert (await client_b.get("/api/ext/two-apps-b/runs")).json() == {"tag": "b"}

    # Diagnostics: each app's list holds its own middleware failures only (one per FAIL run).
    for tag, app in apps.items():
        failures = [d.message for d in app.state.extension_diagnostics]
        assert len(failures) == sum("FAIL" in p for p in PROMPTS[tag]), failures
        assert all(f"boom from {tag}" in message for message in failures), failures
    # App stores: each instance counted its own app's tasks (lead runs and subagents).
    for tag, app in apps.items():
        tasks = sum(1 for t, what, _ in lifecycle if t == tag and what.startswith("start"))
        assert app.state.extensions.app_store.get(ext.Runs).count == tasks
