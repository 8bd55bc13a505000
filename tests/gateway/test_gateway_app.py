"""``create_app()``'s contract: what it publishes, that it loads plugins once, and the order
of the shutdown steps (each step depends on the one before it, so the order is the
behaviour, not an implementation detail)."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import gw_fixtures
import pytest
from gw_fixtures import FakeAgentHost, ServiceRecorder, extensions_with

from conftest import live_server
from deerflow_ext.config.schema import AppConfig, PluginEntry
from deerflow_ext.extensions.boundary.diagnostics import DIAGNOSTICS_LIMIT, DiagnosticsList
from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions
from deerflow_ext.extensions.notifications.notification_loop import notification_loop
from deerflow_ext.gateway import create_app
from deerflow_ext.testing import wait_until


def _body(text: str) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "user", "content": text}]}}


async def test_plugins_load_once_and_the_snapshot_diagnostics_and_loop_are_published(settings_for) -> None:
    # The loader imports "gateway.gw_fixtures", a different module object than this file's
    # "gw_fixtures" (the suite's directory is on sys.path too): count on the loader's one.
    installs = importlib.import_module("gateway.gw_fixtures").INSTALLS
    installs.clear()
    config = AppConfig(
        plugins=[
            PluginEntry(name="counting", use="gateway.gw_fixtures:install_counting"),
            PluginEntry(name="missing", use="no_such_module_for_gateway_test:install"),
        ]
    )
    app = create_app(settings_for(), config=config, agent_host_factory=lambda c, k: FakeAgentHost())
    assert installs == ["install_counting"]
    # One frozen snapshot, the same object on app.state and process-wide.
    assert app.state.extensions is get_loaded_extensions()
    assert app.state.extensions.loaded == ("gateway.gw_fixtures:install_counting",)
    # The live list is the loader's own list (its load failure is in it), kept by the snapshot.
    diagnostics = app.state.extension_diagnostics
    assert isinstance(diagnostics, DiagnosticsList) and diagnostics is app.state.extensions.diagnostics
    assert [d.extension for d in diagnostics] == ["no_such_module_for_gateway_test:install"]

    async with live_server(app) as server, server.client() as client:
        # The serving loop is the notification loop while the Gateway serves.
        assert notification_loop.loop is asyncio.get_running_loop()
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        async with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=_body("hi")) as resp:
            assert resp.status_code == 200
            await resp.aread()
    # Serving (lifespan, a run) never loaded the plugins again: changing them needs a restart.
    assert installs == ["install_counting"]
    assert notification_loop.loop is None

    # Bounded: the most recent DIAGNOSTICS_LIMIT (1000) entries are kept.
    assert DIAGNOSTICS_LIMIT == 1000
    for i in range(DIAGNOSTICS_LIMIT + 5):
        diagnostics.record("x:install", "probe", f"n{i}", level=0)
    kept = diagnostics.snapshot()
    assert len(kept) == DIAGNOSTICS_LIMIT
    assert kept[0].message == "n5" and kept[-1].message == f"n{DIAGNOSTICS_LIMIT + 4}"


class _Memory:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def flush(self) -> None:
        # Fire-and-forget intake must already be closed: a flush must not start new work.
        self.order.append(f"memory-flush(accepting={notification_loop.accepting})")


class _StopRecorder:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        gw_fixtures.record("start", info.run_id)

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        self.order.append(f"on_task_stop:{outcome.value}")


class _OrderedService(ServiceRecorder):
    async def stop(self) -> None:
        self.log.append(f"stop:{self.name}(loop={'set' if notification_loop.loop else 'reset'})")


async def test_shutdown_runs_its_steps_in_the_specified_order(settings_for, monkeypatch) -> None:
    """close intake -> memory flush -> drain runs (on_task_stop) -> stop services (reverse)
    -> reset the notification loop -> dispose the engine."""
    from sqlalchemy.ext.asyncio import AsyncEngine

    order: list[str] = []
    app_engine: AsyncEngine | None = None
    original_close, original_reset = notification_loop.close_intake, notification_loop.reset
    original_dispose = AsyncEngine.dispose

    def close_intake() -> None:
        order.append("close-intake")
        original_close()

    def reset() -> None:
        order.append("reset-loop")
        original_reset()

    async def dispose(self: AsyncEngine, close: bool = True) -> None:
        if self is app_engine:  # PostgreSQL coordinators and signals may dispose engines of their own
            order.append("dispose-engine")
        await original_dispose(self, close)

    monkeypatch.setattr(notification_loop, "close_intake", close_intake)
    monkeypatch.setattr(notification_loop, "reset", reset)
    monkeypatch.setattr(AsyncEngine, "dispose", dispose)

    host = FakeAgentHost(delay=30, memory=_Memory(order))
    services = (_OrderedService("svc_a", order), _OrderedService("svc_b", order))
    app = create_app(
        settings_for(),
        config=AppConfig(),
        extensions=extensions_with(lifecycle=_StopRecorder(order), services=services),
        agent_host_factory=lambda config, checkpointer: host,
    )
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        run_id = (await client.post(f"/api/threads/{thread_id}/runs", json=_body("slow"))).json()["run_id"]
        await wait_until(lambda: "agent-begin" in gw_fixtures.kinds(run_id))
        assert order == ["start:svc_a", "start:svc_b"]
        del order[:]
        app_engine = app.state.runtime.engine
        await server.stop()

    assert order == [
        "close-intake",
        "memory-flush(accepting=False)",
        "on_task_stop:aborted",
        "stop:svc_b(loop=set)",
        "stop:svc_a(loop=set)",
        "reset-loop",
        "dispose-engine",
    ]


@pytest.fixture(autouse=True)
def _restore_process_state():
    from deerflow_ext.extensions.contract.snapshot import set_loaded_extensions

    extensions = get_loaded_extensions()
    yield
    set_loaded_extensions(extensions)


async def test_shutdown_drains_a_subagent_in_flight(settings_for) -> None:
    """The real AgentHost: a lead run that delegated to a subagent is interrupted at shutdown;
    both tasks get their on_task_stop before the Gateway is gone."""
    fixtures = importlib.import_module("gateway.gw_fixtures")
    fixtures.KIND_EVENTS.clear()
    config = AppConfig(plugins=[PluginEntry(name="slow", use="gateway.gw_fixtures:install_slow_subagent")])
    app = create_app(settings_for(), config=config)
    assert app.state.extensions.loaded == ("gateway.gw_fixtures:install_slow_subagent",)
    async with live_server(app) as server, server.client() as client:
        thread_id = (await client.post("/api/threads")).json()["thread_id"]
        body = _body("delegate: count the deer")
        assert (await client.post(f"/api/threads/{thread_id}/runs", json=body)).status_code == 200
        await wait_until(lambda: ("start", "subagent", "") in fixtures.KIND_EVENTS, timeout=10)
        assert fixtures.KIND_EVENTS == [("start", "lead", ""), ("start", "subagent", "")]
        await server.stop()

    stops = [(kind, outcome) for what, kind, outcome in fixtures.KIND_EVENTS if what == "stop"]
    assert stops == [("subagent", "aborted"), ("lead", "aborted")]
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("deerflow-run-")]


def test_extensions_config_json_on_disk_never_loads_a_plugin(settings_for, tmp_path) -> None:
    """Even a hand-edited extensions_config.json naming a plugin loads nothing: plugins come
    from config.yaml only (the JSON file is writable over HTTP)."""
    import json

    fixtures = importlib.import_module("gateway.gw_fixtures")
    fixtures.INSTALLS.clear()
    document = {"plugins": [{"name": "c", "use": "gateway.gw_fixtures:install_counting", "enabled": True}]}
    (tmp_path / "extensions_config.json").write_text(json.dumps(document))
    app = create_app(settings_for(), config=AppConfig(), agent_host_factory=lambda c, k: FakeAgentHost())
    assert app.state.extensions_config_path == tmp_path / "extensions_config.json"
    assert app.state.extensions.loaded == () and fixtures.INSTALLS == []


async def test_a_served_gateway_freezes_its_startup_heap_while_it_serves(settings_for) -> None:
    """``serve``'s options freeze what startup built, and shutdown unfreezes it; the default
    (tests, embedders building many apps) leaves the collector alone."""
    import gc

    from deerflow_ext.gateway.app import GatewayOptions
    from deerflow_ext.gateway.serve import _serve_options

    assert _serve_options().freeze_startup_heap and not GatewayOptions().freeze_startup_heap
    for freeze in (False, True):
        options = GatewayOptions(freeze_startup_heap=freeze)
        app = create_app(
            settings_for(), config=AppConfig(), options=options, agent_host_factory=lambda c, k: FakeAgentHost()
        )
        # Python 3.12 starts with objects of its own in the permanent generation.
        before = gc.get_freeze_count()
        async with live_server(app) as server, server.client() as client:
            assert (await client.get("/health")).status_code == 200
            assert (gc.get_freeze_count() > before) is freeze
        assert gc.get_freeze_count() <= before
