"""Security properties at the Gateway's edges.

* The runtime-context snapshot key is host-internal: a caller's value under it — JSON over
  HTTP, a real ``LoadedExtensions`` through ``RunManager``, or through ``AgentHost.run_lead``
  (what ``DeerFlowClient`` calls; the client itself takes no context) — is never what the
  run, its middleware or its subagents resolve.
* ``PUT /api/extensions-config`` cannot load code: plugin-shaped bodies are rejected and
  nothing is imported or written.
* Contributed routers cannot shadow host routes.
* An extension cannot claim a host table: ``table_prefix`` ``run`` or ``threads`` aborts
  startup before any extension code is imported, ``required`` or not.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import security_ext

from conftest import live_server, make_settings, new_thread, stream_run, wait_run
from deerflow_ext.extensions.contract.snapshot import EXTENSION_SNAPSHOT_CONTEXT_KEY as KEY
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions

PROBE = {"name": "probe", "use": "security_ext:install"}


def _impostor() -> LoadedExtensions:
    return LoadedExtensions(loaded=("impostor:install",), total=1)


def _check_seen(expected: LoadedExtensions, agents: set[str]) -> None:
    assert security_ext.SEEN, "no model call was probed"
    assert {name for name, _ in security_ext.SEEN} >= agents, security_ext.SEEN
    assert all(snapshot is expected for _, snapshot in security_ext.SEEN), security_ext.SEEN


@pytest.fixture(autouse=True)
def _clear() -> None:
    security_ext.SEEN.clear()
    security_ext.KINDS.clear()


async def test_caller_snapshot_key_is_ignored_over_http_and_in_process(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [PROBE]))
    real = app.state.extensions
    async with live_server(app) as live, live.client() as client:
        forged = {KEY: {"loaded": ["evil:install"]}, "note": "caller keys survive"}
        events = await stream_run(client, await new_thread(client), "delegate: look around", context=forged)
        assert events[-1][1]["status"] == "success", events[-1]
        _check_seen(real, {"lead"})
        assert "subagent" in security_ext.KINDS  # the task tool resolved the real snapshot

        # In-process, a caller can hand RunManager a real LoadedExtensions: still ignored.
        security_ext.SEEN.clear()
        thread_id = await new_thread(client)
        handle = await app.state.runtime.runs.start(
            thread_id, messages=[{"role": "user", "content": "delegate: again"}], context={KEY: _impostor()}
        )
        row = await wait_run(client, thread_id, handle.run_id)
        assert row["status"] == "success", row
        _check_seen(real, {"lead"})


async def test_caller_snapshot_key_is_ignored_by_agent_host() -> None:
    """The DeerFlowClient path: its run worker calls AgentHost.run_lead with the pinned set."""
    from langgraph.checkpoint.memory import InMemorySaver

    from deerflow_ext.agents.host import AgentHost, LeadRunRequest
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.plugin_loading.loader import load_extensions

    config = AppConfig.model_validate({"plugins": [PROBE], "memory": {"enabled": False}})
    real = load_extensions(config)
    host = AgentHost(config, checkpointer=InMemorySaver())
    request = LeadRunRequest(
        thread_id="t-sec",
        run_id="r-sec",
        messages=({"role": "user", "content": "hello"},),
        context={KEY: _impostor()},
    )
    result = await host.run_lead(request, extensions=real, task_store=real.new_task_store("r-sec"))
    assert result.answer
    _check_seen(real, {"lead"})


@pytest.mark.parametrize(
    "body",
    [
        {"plugins": [{"name": "x", "use": "security_bomb:install"}]},
        {"mcpServers": {}, "skills": {}, "use": "security_bomb:install"},
        {"mcpServers": {"s": {"command": "python", "use": "security_bomb:install"}}},
        {"skills": {"security_bomb": {"enabled": True, "install": "security_bomb:install"}}},
        {"extensions": {"security_bomb": {"use": "security_bomb:install"}}},
    ],
)
async def test_extensions_config_writes_cannot_load_code(tmp_path: Path, body: dict[str, Any]) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, []))
    async with live_server(app) as live, live.client() as client:
        response = await client.put("/api/extensions-config", json=body)
        assert response.status_code == 422, response.text
        assert "detail" in response.json()
        assert (await client.get("/api/extensions-config")).json() == {"mcpServers": {}, "skills": {}}
    assert not await asyncio.to_thread(Path(app.state.extensions_config_path).exists)
    assert "security_bomb" not in sys.modules


async def test_contributed_routers_cannot_shadow_host_routes(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [{"name": "shadow", "use": "security_ext:install_shadow"}]))
    rejected = [d for d in app.state.extension_diagnostics if d.phase == "router"]
    assert len(rejected) == 4 and {d.extension for d in rejected} == {"security_ext:install_shadow"}, rejected
    async with live_server(app) as live, live.client() as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        thread_id = await new_thread(client)
        assert (await client.get(f"/api/threads/{thread_id}")).json()["thread_id"] == thread_id
        events = await asyncio.wait_for(stream_run(client, thread_id, "hello"), 20)
        assert events[-1][1]["status"] == "success"
        assert (await client.put("/api/extensions-config", json={})).json() == {"mcpServers": {}, "skills": {}}


@pytest.mark.parametrize("prefix", ["run", "threads", "checkpoint", "alembic_"])
@pytest.mark.parametrize("required", [False, True])
def test_extension_cannot_claim_a_host_table(tmp_path: Path, prefix: str, required: bool) -> None:
    from deerflow_ext.extensions.plugin_loading.tables import TablePrefixCollisionError
    from deerflow_ext.gateway import create_app

    entry = {"name": "claim", "use": "security_bomb:install", "table_prefix": prefix, "required": required}
    with pytest.raises(TablePrefixCollisionError):
        create_app(make_settings(tmp_path, [entry]))
    assert "security_bomb" not in sys.modules  # aborted before importing any extension
