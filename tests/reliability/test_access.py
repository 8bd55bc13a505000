"""Who may talk to the Gateway, against a real Gateway on loopback.

* DNS rebinding: a request addressed as ``Host: attacker.example`` is refused (421) on every
  route but liveness; loopback names are answered, and ``DEERFLOW_ALLOWED_HOSTS`` adds names.
* Cross-site simple requests (a form POST, a ``text/plain`` fetch) carrying a foreign
  ``Origin`` are refused (403) on host and extension routes alike; allowed CORS origins and
  the Gateway's own origin are not, and clients without ``Origin`` are unaffected.
* With ``DEERFLOW_API_TOKEN`` every host route and every route an extension contributed
  needs the token (Bearer or ``X-Api-Key``); ``/health``, ``/ok`` and the docs stay open,
  ``/metrics`` does not.
* ``PUT /api/extensions-config`` writes only validated, size-limited files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import routed_ext

from conftest import live_server, make_settings, new_thread, run_body, wait_run

ROUTED = {"name": "routed", "use": "routed_ext:install"}
TOKEN = "s3cret-token-for-the-tests-0123456789"


@pytest.fixture(autouse=True)
def _clear() -> None:
    routed_ext.WRITES.clear()


async def test_dns_rebinding_hosts_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [ROUTED]))
    async with live_server(app) as live, live.client() as client:
        port = live.base_url.rsplit(":", 1)[1]
        thread_id = await new_thread(client)
        rebound = {"host": f"attacker.example:{port}"}
        for method, path in [
            ("GET", "/api/threads"),
            ("GET", f"/api/threads/{thread_id}"),
            ("DELETE", f"/api/threads/{thread_id}"),
            ("PUT", "/api/extensions-config"),
            ("GET", "/ext/hello"),
            ("GET", "/docs"),
            ("GET", "/metrics"),
        ]:
            response = await client.request(method, path, headers=rebound, json={})
            assert response.status_code == 421, (method, path, response.status_code)
            assert "DEERFLOW_ALLOWED_HOSTS" in response.json()["detail"]
        assert (await client.get(f"/api/threads/{thread_id}")).status_code == 200  # not deleted
        for name in ("localhost", "127.0.0.1", "[::1]", "LOCALHOST."):
            response = await client.get("/api/threads", headers={"host": f"{name}:{port}"})
            assert response.status_code == 200, (name, response.text)
        # Liveness answers whatever the Host (an orchestrator probes the container's address).
        assert (await client.get("/health", headers=rebound)).status_code == 200

    monkeypatch.setenv("DEERFLOW_ALLOWED_HOSTS", "gateway.internal, 127.0.0.1")
    app = create_app(make_settings(tmp_path, []))
    async with live_server(app) as live, live.client() as client:
        assert (await client.get("/api/threads", headers={"host": "gateway.internal:8001"})).status_code == 200
        assert (await client.get("/api/threads", headers={"host": "localhost"})).status_code == 421


async def test_cross_site_simple_requests_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deerflow_ext.gateway import create_app

    monkeypatch.setenv("DEERFLOW_CORS_ORIGINS", "loopback,https://ui.example")
    app = create_app(make_settings(tmp_path, [ROUTED]))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        evil = "https://evil.example"
        form = {"content-type": "application/x-www-form-urlencoded", "origin": evil}
        plain = {"content-type": "text/plain", "origin": evil}
        for method, path, headers in [
            ("POST", "/api/threads", form),
            ("POST", f"/api/threads/{thread_id}/runs", plain),
            ("DELETE", f"/api/threads/{thread_id}", {"origin": evil}),
            ("PUT", "/api/extensions-config", plain),
            ("POST", "/ext/note", form),
            ("POST", "/api/threads", {"content-type": "text/plain", "origin": "null"}),
            ("POST", "/api/threads", {"content-type": "text/plain", "sec-fetch-site": "cross-site"}),
        ]:
            body = json.dumps(run_body("from another site")).encode()
            response = await client.request(method, path, content=body, headers=headers)
            assert response.status_code == 403, (method, path, response.status_code, response.text)
            assert "cross-site" in response.json()["detail"]
        assert routed_ext.WRITES == []
        assert (await client.get(f"/api/threads/{thread_id}/runs")).json() == []

        # Allowed origins (CORS), the Gateway's own origin and origin-less clients go through.
        for origin in ("https://ui.example", "http://localhost:3000", live.base_url):
            response = await client.post("/api/threads", json={}, headers={"origin": origin})
            assert response.status_code == 200, (origin, response.text)
            assert (await client.post("/ext/note", content=b"x", headers={"origin": origin})).status_code == 200
        response = await client.post(f"/api/threads/{thread_id}/runs", content=json.dumps(run_body("proxied")))
        assert response.status_code == 200, response.text  # text/plain without Origin: agent-chat-ui's proxy
        assert (await wait_run(client, thread_id, response.json()["run_id"]))["status"] == "success"
        # Reads from a foreign page are CORS's business (it cannot read the answer).
        assert (await client.get("/api/threads", headers={"origin": evil})).status_code == 200


async def test_the_api_token_guards_every_host_and_extension_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deerflow_ext.gateway import create_app

    monkeypatch.setenv("DEERFLOW_API_TOKEN", TOKEN)
    app = create_app(make_settings(tmp_path, [ROUTED]))
    async with live_server(app) as live, live.client() as anonymous:
        bearer = {"authorization": f"Bearer {TOKEN}"}
        async with live.client(headers=bearer) as client:
            thread_id = await new_thread(client)
            guarded = [
                ("GET", "/api/threads"),
                ("POST", "/api/threads/search"),
                ("GET", f"/api/threads/{thread_id}"),
                ("DELETE", f"/api/threads/{thread_id}"),
                ("POST", f"/api/threads/{thread_id}/runs"),
                ("GET", f"/api/threads/{thread_id}/runs"),
                ("GET", "/api/assistants/lead_agent"),
                ("GET", "/api/info"),
                ("GET", "/api/extensions"),
                ("GET", "/api/extensions-config"),
                ("PUT", "/api/extensions-config"),
                ("GET", "/metrics"),
                ("GET", "/ext/hello"),
                ("POST", "/ext/note"),
            ]
            for method, path in guarded:
                for headers in ({}, {"authorization": "Bearer wrong-token-wrong-token"}, {"x-api-key": "nope"}):
                    response = await anonymous.request(method, path, headers=headers, json=run_body("hi"))
                    assert response.status_code == 401, (method, path, headers, response.status_code)
                    assert response.headers["www-authenticate"] == "Bearer"
            assert routed_ext.WRITES == []
            assert (await client.get(f"/api/threads/{thread_id}")).status_code == 200  # not deleted

            for path in ("/health", "/ok", "/api/ok", "/docs", "/openapi.json"):
                assert (await anonymous.get(path)).status_code == 200, path
            document = (await anonymous.get("/openapi.json")).json()  # Swagger UI's "Authorize"
            assert set(document["components"]["securitySchemes"]) == {"bearer", "apiKey"}
            assert (await client.get("/ext/hello")).json() == {"hello": "world"}
            assert (await client.get("/metrics")).status_code == 200
            created = await client.post(f"/api/threads/{thread_id}/runs", json=run_body("with a token"))
            assert created.status_code == 200
            assert (await wait_run(client, thread_id, created.json()["run_id"]))["status"] == "success"
            keyed = await anonymous.get("/api/threads", headers={"x-api-key": TOKEN})
            assert keyed.status_code == 200 and thread_id in {t["thread_id"] for t in keyed.json()}


async def test_a_config_token_is_honoured_and_a_short_one_refused(tmp_path: Path) -> None:
    from deerflow_ext.config.loading import ConfigError, load_app_config
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [], gateway={"api_token": TOKEN}))
    async with live_server(app) as live, live.client() as client:
        assert (await client.get("/api/threads")).status_code == 401
        assert (await client.get("/api/threads", headers={"authorization": f"bearer {TOKEN}"})).status_code == 200

    make_settings(tmp_path, [], gateway={"api_token": "s3cr3t-k3y"})
    with pytest.raises(ConfigError) as refused:
        load_app_config(tmp_path / "config.yaml")
    # Named, with its length, never shown.
    assert "api_token" in str(refused.value) and "s3cr3t-k3y" not in str(refused.value)


def _temporary_files(directory: Path) -> list[Path]:
    return list(directory.glob("extensions_config.json.*"))


async def test_extensions_config_writes_are_validated_and_bounded(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, []))
    target = tmp_path / "extensions_config.json"
    async with live_server(app) as live, live.client() as client:
        good = {"mcpServers": {"files": {"type": "http", "url": "https://mcp.example.com/files"}}, "skills": {}}
        assert (await client.put("/api/extensions-config", json=good)).status_code == 200
        written = target.read_bytes()
        bad_bodies = [
            {"mcpServers": {"../../etc": {"command": "x"}}},
            {"mcpServers": {"s": {"type": "http", "url": "file:///etc/passwd"}}},
            {"mcpServers": {"s": {"env": {"BAD NAME": "1"}}}},
            {"mcpServers": {"s": {"headers": {"bad\nheader": "1"}}}},
            {"mcpServers": {"s": {"args": ["a"] * 300}}},
            {"mcpServers": {"s": {"command": "c" * 5000}}},
            {"mcpServers": {f"s{i}": {"description": "d" * 4000} for i in range(100)}},
            {"plugins": [{"use": "os:system"}]},
        ]
        for body in bad_bodies:
            response = await client.put("/api/extensions-config", json=body)
            assert response.status_code in (413, 422), (str(body)[:80], response.status_code, response.text[:200])
            assert response.json()["detail"]
    assert target.read_bytes() == written
    assert _temporary_files(tmp_path) == []
