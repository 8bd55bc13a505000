"""Plugin actions under ``authorization:`` roles on a real uvicorn: DeerFlow's target
``<namespace>/<action>``, its deny text, fail-closed by default, decided before a byte of the
body is read (a body that never arrives, a body past 256 KiB), re-read on every request."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import pytest
from gw_fixtures import FakeAgentHost

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.gateway import create_app
from deerflow_extension_api import (
    EXTENSION_PRINCIPAL_RESOLVER_KEY,
    ActionContext,
    BackendAction,
    ExtensionPrincipal,
    PluginContribution,
)

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

DENIED = {"detail": "Plugin action not permitted for your role."}
called: list[str] = []


def _action(name: str) -> BackendAction:
    async def handler(payload: Mapping[str, Any], context: ActionContext) -> Any:
        called.append(name)
        return {"user": context.principal.user_id}

    return BackendAction(name, handler)


def _extensions() -> LoadedExtensions:
    registry = HostRegistry()
    registry.begin(0, "acme", "acme:install")
    registry.plugin(PluginContribution("acme.tools", "Tools", enabled=True, backend=(_action("read"), _action("wipe"))))
    registry.end()
    return registry.freeze(loaded=["acme:install"], total=1)


def _config(**authorization: Any) -> AppConfig:
    return AppConfig.model_validate({"authorization": authorization})


ROLES = {"user": {"plugin_action": {"allow": ["acme.tools/read"]}}, "admin": {}}


@pytest.fixture
async def server(settings_for: Any) -> Any:
    called.clear()
    app = create_app(
        settings_for(),
        config=_config(enabled=True, roles=ROLES),
        extensions=_extensions(),
        agent_host_factory=lambda c, k: FakeAgentHost(),
    )
    async with live_server(app) as live, live.client() as http:
        yield app, http, live


def _as(app: Any, principal: ExtensionPrincipal) -> None:
    setattr(app.state, EXTENSION_PRINCIPAL_RESOLVER_KEY, lambda request: principal)


async def _status(http: Any, action: str, body: bytes = b"{}") -> tuple[int, Any]:
    response = await http.post(f"/api/plugins/acme.tools/actions/{action}", content=body)
    return response.status_code, response.json()


async def test_roles_decide_each_action_by_its_target(server: Any) -> None:
    app, http, _ = server
    _as(app, ExtensionPrincipal("u1", roles=("user",)))
    assert await _status(http, "read") == (200, {"user": "u1"})
    assert await _status(http, "wipe") == (403, DENIED)
    # A role with no plugin_action rule is unrestricted (DeerFlow's RBAC).
    _as(app, ExtensionPrincipal("root", is_admin=True, roles=("admin",)))
    assert await _status(http, "wipe") == (200, {"user": "root"})
    # Unknown actions and plugins stay 404: no decision is asked for them.
    assert (await http.post("/api/plugins/acme.tools/actions/nope", json={})).status_code == 404
    assert called == ["read", "wipe"]


async def test_unanswerable_principals_fail_closed_unless_told_otherwise(server: Any) -> None:
    app, http, _ = server
    for principal in (ExtensionPrincipal("u2", roles=("guest",)), ExtensionPrincipal("u3")):
        _as(app, principal)
        assert await _status(http, "read") == (403, DENIED)
    # An internal caller without a role takes default_role ("user").
    _as(app, ExtensionPrincipal("svc", is_internal=True))
    assert await _status(http, "read") == (200, {"user": "svc"})
    # The section is read per request: fail-open, then off, with no restart.
    _as(app, ExtensionPrincipal("u2", roles=("guest",)))
    app.state.config = _config(enabled=True, fail_closed=False, roles=ROLES)
    assert await _status(http, "read") == (200, {"user": "u2"})
    app.state.config = _config(enabled=False, roles=ROLES)
    assert await _status(http, "wipe") == (200, {"user": "u2"})
    assert called == ["read", "read", "wipe"]


async def test_a_refusal_never_reads_the_body(server: Any) -> None:
    app, http, live = server
    _as(app, ExtensionPrincipal("u1", roles=("user",)))
    # Past the 256 KiB limit: refused (403), not 413, since the body is never read.
    assert await _status(http, "wipe", b"{" + b" " * (300 * 1024) + b"}") == (403, DENIED)
    # At the edge, an allowed action reads it and answers.
    edge = b'{"a":"' + b"x" * (256 * 1024 - 9) + b'"}'
    assert len(edge) == 256 * 1024 - 1 and (await _status(http, "read", edge))[0] == 200
    # A body announced and never sent: the refusal arrives all the same.
    url = urlsplit(live.base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(
        b"POST /api/plugins/acme.tools/actions/wipe HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    writer.close()
    assert head.startswith(b"HTTP/1.1 403")
    assert called == ["read"]
