"""``/api/plugins`` on a real uvicorn: the four routes, their headers, and an action's checks in
DeerFlow's order, each limit at and past its edge (digest §4.3, §4.6)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from gw_fixtures import FakeAgentHost

import deerflow_ext.gateway.routes.plugins as plugins_routes
from conftest import live_server
from deerflow_ext.config.schema import AppConfig, PluginEntry
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.gateway import create_app
from deerflow_extension_api import (
    ActionContext,
    AgentRunError,
    AgentRuns,
    BackendAction,
    BatchResultError,
    BrowserAssets,
    BrowserModule,
    ModelTool,
    PluginContribution,
    SettingsField,
)

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

CODE = "export default {apiVersion: 1, module: 'acme.page'};"
KIB = 1024
calls: list[tuple[str, dict[str, Any], ActionContext]] = []


def action(name: str, behaviour: Any = None) -> BackendAction:
    async def handler(payload: Mapping[str, Any], context: ActionContext) -> Any:
        calls.append((name, dict(payload), context))
        if behaviour is not None:
            return await behaviour(payload, context)
        return {"echo": dict(payload), "user": context.principal.user_id}

    return BackendAction(name, handler)


async def _raise(error: BaseException) -> Any:
    raise error


async def _slow(payload: Any, context: Any) -> Any:
    await asyncio.sleep(5)


async def _batches(payload: Any, context: ActionContext) -> Any:
    assert context.batch_results is not None
    if not await context.batch_results().list_batches(thread_id="t"):  # the host's reader: no such run
        raise BatchResultError(404, "Batch not found")
    return None


async def _mutate(payload: Any, context: ActionContext) -> Any:
    context.settings["enabled"] = False  # type: ignore[index]


async def _nan(payload: Any, context: Any) -> Any:
    return float("nan")


def plugins(assets_root: Path) -> LoadedExtensions:
    (assets_root / "static").mkdir()
    (assets_root / "static" / "index.js").write_text("export default {}", encoding="utf-8")
    (assets_root / "static" / "app.css").write_text("body{}", encoding="utf-8")
    (assets_root / "ui_manifest.json").write_text(
        json.dumps({"schema_version": 1, "entry": "static/index.js", "files": ["static/index.js", "static/app.css"]}),
        encoding="utf-8",
    )

    async def tool_handler(payload: Any, context: Any) -> Any:
        return {}

    limit = SettingsField("limit", "Limit", "integer", 5)
    secret_limit = SettingsField("quota", "Quota", "integer", 9)
    registry = HostRegistry()
    registry.begin(0, "acme", "acme:install")
    for item in (
        PluginContribution(
            "acme.page",
            "Page",
            description="A page.",
            enabled=True,
            fields=(limit, secret_limit),
            frontend=BrowserModule("acme.page", CODE, ("limit",)),
            backend=(
                action("echo"),
                action("fails", lambda p, c: _raise(RuntimeError("password=hunter2"))),
                action("rejects", lambda p, c: _raise(ValueError("bad"))),
                action("conflict", lambda p, c: _raise(AgentRunError(409, "a run is active"))),
                action("slow", _slow),
                action("batches", _batches),
                action("mutates", _mutate),
                action("nan", _nan),
            ),
            tools=(ModelTool("search", "S.", {"type": "object"}, tool_handler),),
        ),
        PluginContribution("acme.assets", "Assets", frontend=BrowserAssets("acme.assets", assets_root)),
        PluginContribution("acme.off", "Off", backend=(action("echo"),)),
    ):
        assert registry.plugin(item) is True
    registry.end()
    return registry.freeze(loaded=["acme:install"], total=1)


@pytest.fixture
async def client(settings_for: Any, tmp_path: Path) -> Any:
    calls.clear()
    root = tmp_path / "assets"
    root.mkdir()
    ext = plugins(root)
    app = create_app(
        settings_for(), config=AppConfig(), extensions=ext, agent_host_factory=lambda c, k: FakeAgentHost()
    )
    async with live_server(app) as server, server.client() as http:
        http.app_extensions = ext  # type: ignore[attr-defined]
        yield http


def _assets_revision(http: Any) -> str:
    frontend = http.app_extensions.plugins[1].contributor.frontend
    return str(frontend.revision)


# -- the listing -----------------------------------------------------------------------------------
async def test_the_listing_has_one_card_per_plugin_with_only_public_settings(client: Any) -> None:
    response = await client.get("/api/plugins")
    assert response.status_code == 200 and response.headers["cache-control"] == "private, no-store"
    page, assets, off = response.json()
    revision = hashlib.sha256(CODE.encode()).hexdigest()
    assert page == {
        "namespace": "acme.page",
        "title": "Page",
        "description": "A page.",
        "viewer_id": "default",
        "module": "acme.page",
        "entry": f"/api/plugins/modules/acme.page/{revision}.mjs",
        "transport": "inline-v1",
        "settings": {"enabled": True, "limit": 5},  # quota is not projected
        "backend_actions": ["echo", "fails", "rejects", "conflict", "slow", "batches", "mutates", "nan"],
    }
    assert assets["transport"] == "assets-v1" and assets["settings"] == {"enabled": False}
    assert assets["entry"] == f"/api/plugins/acme.assets/assets/{_assets_revision(client)}/static/index.js"
    assert (off["module"], off["entry"], off["transport"], off["backend_actions"]) == (None, None, None, ["echo"])


async def test_no_principal_is_401_on_every_route(settings_for: Any, tmp_path: Path) -> None:
    """Without a token only a loopback caller is the principal; a remote one is nobody."""
    app = create_app(
        settings_for(),
        config=AppConfig(),
        extensions=LoadedExtensions(),
        agent_host_factory=lambda c, k: FakeAgentHost(),
    )
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 4242))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as remote:
        for response in (
            await remote.get("/api/plugins"),
            await remote.get("/api/plugins/modules/acme.page/abc.mjs"),
            await remote.get("/api/plugins/acme.assets/assets/abc/static/index.js"),
            await remote.post("/api/plugins/acme.page/actions/echo", json={}),
        ):
            assert (response.status_code, response.json()) == (401, {"detail": "Authentication required."})


# -- browser code ------------------------------------------------------------------------------------
async def test_an_inline_module_is_served_by_its_revision(client: Any) -> None:
    revision = hashlib.sha256(CODE.encode()).hexdigest()
    served = await client.get(f"/api/plugins/modules/acme.page/{revision}.mjs")
    assert served.status_code == 200 and served.text == CODE
    assert served.headers["content-type"].startswith("text/javascript")
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["cache-control"] == "private, no-store"
    stale = await client.get(f"/api/plugins/modules/acme.page/{'0' * 64}.mjs")
    assert (stale.status_code, stale.json()["detail"]) == (404, "Plugin module unavailable; reload the page.")


async def test_assets_are_served_from_the_snapshot_with_immutable_sandboxed_headers(
    client: Any, tmp_path: Path
) -> None:
    revision = _assets_revision(client)
    (tmp_path / "assets" / "static" / "index.js").write_text("changed on disk", encoding="utf-8")
    served = await client.get(f"/api/plugins/acme.assets/assets/{revision}/static/index.js")
    assert served.status_code == 200 and served.text == "export default {}"  # the snapshot, not the disk
    assert served.headers["content-type"].startswith("text/javascript")
    assert served.headers["cache-control"] == "private, max-age=31536000, immutable"
    # The front layer adds Origin (CORS) to what the route varies on.
    assert {"Cookie", "Authorization"} <= {v.strip() for v in served.headers["vary"].split(",")}
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "sandbox"
    css = await client.get(f"/api/plugins/acme.assets/assets/{revision}/static/app.css")
    assert css.headers["content-type"].startswith("text/css")  # served though the plugin is disabled


@pytest.mark.parametrize(
    "path",
    [
        "acme.assets/assets/{rev}/ui_manifest.json",  # not listed
        "acme.assets/assets/{rev}/static/missing.js",
        "acme.assets/assets/{rev}/static/%2e%2e/ui_manifest.json",
        "acme.assets/assets/{rev}/static/index.js/extra",
        "acme.page/assets/{rev}/static/index.js",  # another namespace
        "acme.assets/assets/0000/static/index.js",  # another revision
    ],
)
async def test_anything_else_under_assets_is_404_and_not_cached(client: Any, path: str) -> None:
    response = await client.get("/api/plugins/" + path.format(rev=_assets_revision(client)))
    assert response.status_code == 404
    assert response.json()["detail"] == "Plugin asset unavailable; reload the page."
    assert response.headers["cache-control"] == "private, no-store"


# -- actions -----------------------------------------------------------------------------------------
async def test_an_enabled_action_answers_with_the_handlers_json(client: Any) -> None:
    response = await client.post("/api/plugins/acme.page/actions/echo", json={"q": 1})
    assert (response.status_code, response.json()) == (200, {"echo": {"q": 1}, "user": "default"})
    ((name, payload, context),) = calls
    assert (name, payload, dict(context.settings)) == ("echo", {"q": 1}, {"enabled": True, "limit": 5, "quota": 9})
    # The host lends the action an agent-run handle bound to its principal (test_agent_runs_host).
    assert context.principal.is_admin and isinstance(context.agent_runs, AgentRuns)


async def test_the_viewer_header_must_name_the_principal(client: Any) -> None:
    ok = await client.post(
        "/api/plugins/acme.page/actions/echo", json={}, headers={"x-deerflow-plugin-viewer": "default"}
    )
    assert ok.status_code == 200
    stale = await client.post(
        "/api/plugins/acme.page/actions/echo", json={}, headers={"x-deerflow-plugin-viewer": "bob"}
    )
    assert (stale.status_code, stale.json()["detail"]) == (409, "Account changed; reload this plugin view.")
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("path", "status", "detail"),
    [
        ("/api/plugins/acme.nope/actions/echo", 404, "Plugin is not installed."),
        ("/api/plugins/acme.page/actions/nope", 404, "Plugin action is not installed."),
        ("/api/plugins/acme.off/actions/echo", 403, "Plugin disabled by administrator."),
    ],
)
async def test_unknown_and_disabled_are_refused_before_the_body_is_read(
    client: Any, path: str, status: int, detail: str
) -> None:
    response = await client.post(path, content=b"x" * (300 * KIB))  # too big, and not JSON: never read
    assert (response.status_code, response.json()["detail"]) == (status, detail)
    assert calls == []


async def test_the_body_limit_is_256_kib(client: Any) -> None:
    overhead = len(json.dumps({"q": ""}).encode())
    at = json.dumps({"q": "x" * (256 * KIB - overhead)}).encode()
    assert len(at) == 256 * KIB
    ok = await client.post(
        "/api/plugins/acme.page/actions/echo", content=at, headers={"content-type": "application/json"}
    )
    assert ok.status_code == 200
    past = await client.post(
        "/api/plugins/acme.page/actions/echo", content=at + b" ", headers={"content-type": "application/json"}
    )
    assert (past.status_code, past.json()["detail"]) == (413, "Plugin action input exceeds 256 KiB.")


@pytest.mark.parametrize("body", [b"[1, 2]", b"not json", b"\xff\xfe{}", b"", b'"text"', b"null"])
async def test_the_body_must_be_a_json_object(client: Any, body: bytes) -> None:
    response = await client.post("/api/plugins/acme.page/actions/echo", content=body)
    assert (response.status_code, response.json()["detail"]) == (422, "Plugin action requires a JSON object.")
    assert calls == []


@pytest.mark.parametrize(
    ("name", "status", "detail"),
    [
        ("rejects", 422, "Invalid plugin action input."),
        ("fails", 502, "Plugin action failed."),
        ("conflict", 409, "a run is active"),
        ("batches", 404, "Batch not found"),  # a BatchResultError keeps its status
        ("mutates", 502, "Plugin action failed."),  # settings are read-only
        ("nan", 502, "Plugin action failed."),  # not JSON
    ],
)
async def test_handler_failures_map_to_statuses_without_leaking(
    client: Any, name: str, status: int, detail: str
) -> None:
    response = await client.post(f"/api/plugins/acme.page/actions/{name}", json={})
    assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert "hunter2" not in response.text


async def test_a_slow_action_is_504(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins_routes, "ACTION_TIMEOUT_SECONDS", 0.05)
    response = await client.post("/api/plugins/acme.page/actions/slow", json={})
    assert (response.status_code, response.json()["detail"]) == (504, "Plugin action timed out.")


async def test_there_is_no_settings_write_route(client: Any) -> None:
    for method in ("PATCH", "PUT"):
        response = await client.request(method, "/api/plugins/acme.page", json={"enabled": False})
        assert response.status_code in (404, 405)
    assert (await client.post("/api/plugins/acme.page/reset", json={})).status_code in (404, 405)


def test_a_bad_setting_names_the_gateways_own_config_file(settings_for: Any) -> None:
    settings = settings_for()
    record = PluginEntry(
        name="notes", use="extensions.fixtures_full_stack:install", settings={"acme.notes": {"limit": "ten"}}
    )
    app = create_app(settings, config=AppConfig(plugins=[record]), agent_host_factory=lambda c, k: FakeAgentHost())
    (problem,) = [d for d in app.state.extension_diagnostics if d.phase == "load"]
    expected = f"{settings.config}: plugins[notes].settings['acme.notes'].limit: expected integer, got str 'ten'"
    assert expected in problem.message and app.state.extensions.plugins == ()
