"""An error escaping a contributed route: JSON 500, logged and recorded against its extension."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fastapi import APIRouter, HTTPException
from gw_fixtures import FakeAgentHost, extensions_with

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import create_app

EXT = "gateway.gw_fixtures:routers"


def _router() -> APIRouter:
    router = APIRouter(prefix="/acme")

    @router.get("/boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("kaput")

    @router.get("/own-cancel")
    async def own_cancel() -> dict[str, str]:
        raise asyncio.CancelledError("own timeout")  # an internal timeout built on cancellation

    @router.get("/teapot")
    async def teapot() -> dict[str, str]:
        raise HTTPException(status_code=418, detail="short and stout")

    @router.get("/ok")
    async def ok() -> dict[str, str]:
        return {"ok": "acme"}

    @router.post("/items/{item_id}")
    def item(item_id: str) -> dict[str, str]:  # a sync endpoint, run in the threadpool
        raise ValueError(f"bad item {item_id}")

    return router


@pytest.fixture
async def served(settings_for: Any) -> Any:
    app = create_app(
        settings_for(),
        config=AppConfig(),
        extensions=extensions_with(routers=(_router(),)),
        agent_host_factory=lambda c, k: FakeAgentHost(),
    )

    @app.get("/host-boom")
    async def host_boom() -> dict[str, str]:
        raise RuntimeError("host bug")

    async with live_server(app) as server, server.client() as http:
        yield app, http


@pytest.mark.parametrize(
    ("method", "path", "text"),
    [
        ("GET", "/acme/boom", "RuntimeError: kaput"),
        ("GET", "/acme/own-cancel", "CancelledError: own timeout"),
        ("POST", "/acme/items/7", "ValueError: bad item 7"),
    ],
)
async def test_a_failing_contributed_route_is_a_json_500_attributed_to_its_extension(
    served: Any, caplog: pytest.LogCaptureFixture, method: str, path: str, text: str
) -> None:
    app, http = served
    caplog.set_level(logging.INFO)
    response = await http.request(method, path)
    assert response.status_code == 500
    assert response.json() == {"detail": f"internal error: {text.split(':')[0]}"}
    message = f"route {method} {path} raised {text}"
    [diagnostic] = app.state.extension_diagnostics.for_extension(EXT)
    assert (diagnostic.phase, diagnostic.message) == ("router", message)
    assert f"Extension {EXT}: {message}" in caplog.messages
    assert (await http.get("/acme/ok")).json() == {"ok": "acme"}  # still serving
    assert (await http.get("/health")).json() == {"status": "ok"}


async def test_http_exceptions_from_a_contributed_route_are_not_failures(served: Any) -> None:
    app, http = served
    response = await http.get("/acme/teapot")
    assert (response.status_code, response.json()) == (418, {"detail": "short and stout"})
    assert app.state.extension_diagnostics.for_extension(EXT) == ()


async def test_host_routes_keep_the_host_error_handling(served: Any, caplog: pytest.LogCaptureFixture) -> None:
    app, http = served
    caplog.set_level(logging.INFO)
    response = await http.get("/host-boom")
    assert (response.status_code, response.json()) == (500, {"detail": "internal error: RuntimeError"})
    assert "GET /host-boom failed" in caplog.text
    assert not any(d.phase == "router" for d in app.state.extension_diagnostics)
