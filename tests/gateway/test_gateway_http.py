"""HTTP contract: JSON errors for malformed bodies, extensions_config.json, startup errors."""

from __future__ import annotations

import json

import pytest
from gw_fixtures import FakeAgentHost

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import create_app


@pytest.fixture
async def client(settings_for):
    app = create_app(settings_for(), config=AppConfig(), agent_host_factory=lambda c, k: FakeAgentHost())
    async with live_server(app) as server, server.client() as http:
        http.app = app  # type: ignore[attr-defined]
        yield http


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (json.dumps({}).encode(), "'input' is required unless"),
        (json.dumps({"input": {"messages": []}}).encode(), "input.messages"),
        (json.dumps({"input": {"messages": [{"role": "user"}]}}).encode(), "content"),
        (json.dumps({"input": {"messages": [{"role": "robot", "content": "x"}]}}).encode(), "role"),
        (
            json.dumps({"input": {"messages": [{"role": "user", "content": "x"}]}, "gaol": "x"}).encode(),
            "gaol",
        ),
    ],
)
async def test_malformed_run_bodies_are_4xx_json(client, content: bytes, needle: str) -> None:
    thread_id = (await client.post("/api/threads")).json()["thread_id"]
    for path in (f"/api/threads/{thread_id}/runs", f"/api/threads/{thread_id}/runs/stream"):
        response = await client.post(path, content=content, headers={"content-type": "application/json"})
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/json"
        assert needle in response.json()["detail"]
    assert (await client.get(f"/api/threads/{thread_id}/runs")).json() == []


async def test_not_found_is_json(client) -> None:
    body = {"input": {"messages": [{"role": "user", "content": "x"}]}}
    for method, path in [
        ("GET", "/api/threads/missing"),
        ("DELETE", "/api/threads/missing"),
        ("POST", "/api/threads/missing/runs"),
        ("GET", "/api/threads/missing/runs/r"),
        ("GET", "/no/such/route"),
    ]:
        response = await client.request(method, path, json=body if method == "POST" else None)
        assert response.status_code == 404, (method, path)
        assert response.json()["detail"]
    response = await client.post("/api/threads", json={"metadata": "not a dict"})
    assert response.status_code == 422 and "metadata" in response.json()["detail"]


async def test_extensions_config_cannot_carry_plugins(client, tmp_path) -> None:
    assert (await client.get("/api/extensions-config")).json() == {"mcpServers": {}, "skills": {}}
    bad = {"mcpServers": {}, "skills": {}, "plugins": [{"name": "x", "use": "evil:install"}]}
    response = await client.put("/api/extensions-config", json=bad)
    assert response.status_code == 422 and "plugins" in response.json()["detail"]
    sneaky = {"mcpServers": {"fs": {"command": "npx", "use": "evil:install"}}}
    assert (await client.put("/api/extensions-config", json=sneaky)).status_code == 422

    # A stdio command is code execution: over HTTP only one config.yaml allows (mcp_servers/policy.py).
    stdio = {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server"]}}, "skills": {}}
    refused = await client.put("/api/extensions-config", json=stdio)
    assert refused.status_code == 422 and "allowed_commands" in refused.json()["detail"]
    good = {
        "mcpServers": {"fs": {"type": "http", "url": "https://mcp.example.com/fs"}},
        "skills": {"pdf": {"enabled": False}},
    }
    saved = await client.put("/api/extensions-config", json=good)
    assert saved.status_code == 200
    path = tmp_path / "extensions_config.json"  # next to config.yaml
    assert json.loads(path.read_text())["mcpServers"]["fs"]["url"] == "https://mcp.example.com/fs"
    assert (await client.get("/api/extensions-config")).json() == saved.json()
    assert client.app.state.extensions.loaded == ()


def test_invalid_config_yaml_stops_create_app(tmp_path) -> None:
    from deerflow_ext.config.loading import ConfigError
    from deerflow_ext.config.settings import Settings

    (tmp_path / "config.yaml").write_text("plugins:\n  - name: a\n    use: x:y\n    enable: true\n")
    settings = Settings(config=tmp_path / "config.yaml", database_url=f"sqlite:///{tmp_path / 'db'}")
    with pytest.raises(ConfigError):
        create_app(settings)


def test_required_extension_failure_stops_create_app(tmp_path) -> None:
    from deerflow_ext.config.schema import PluginEntry
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError

    settings = Settings(config=tmp_path / "config.yaml", database_url=f"sqlite:///{tmp_path / 'db'}")
    config = AppConfig(plugins=[PluginEntry(name="a", use="no_such_module_xyz:install", required=True)])
    with pytest.raises(ExtensionLoadError):
        create_app(settings, config=config)


def test_serve_reports_configuration_errors_without_traceback(tmp_path, capsys, monkeypatch) -> None:
    from deerflow_ext.gateway.serve import serve_command

    monkeypatch.setenv("DEERFLOW_DATABASE_URL", f"sqlite:///{tmp_path / 'db'}")
    (tmp_path / "config.yaml").write_text("plugins: 3\n")
    code = serve_command(["--config", str(tmp_path / "config.yaml"), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: ") and "Traceback" not in err
    prefix = "plugins:\n  - name: a\n    use: gateway.gw_fixtures:install_good\n    table_prefix: thread\n"
    (tmp_path / "config.yaml").write_text(prefix)
    assert serve_command(["--config", str(tmp_path / "config.yaml"), "--port", "0"]) == 1
    # The loader's attributed log line, then the one refusal line.
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: table_prefix 'thread' collides")
