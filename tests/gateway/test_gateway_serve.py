"""``serve``: uvicorn is always given a graceful-shutdown bound, and the bound really holds."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fastapi import APIRouter
from gw_fixtures import FakeAgentHost, extensions_with

from conftest import free_port
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import create_app
from deerflow_ext.gateway.serve import serve_command, uvicorn_options


@pytest.fixture
def captured_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> list[Any]:
    """uvicorn's configs as ``serve`` hands them over, with the server not actually run."""
    import uvicorn

    configs: list[Any] = []

    def run(self: uvicorn.Server, sockets: Any = None) -> None:
        configs.append(self.config)
        self.started = True

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setenv("DEERFLOW_DATABASE_URL", f"sqlite:///{tmp_path / 'db'}")
    monkeypatch.setenv("DEERFLOW_PORT", "0")
    (tmp_path / "config.yaml").write_text("plugins: []\n")
    return configs


def test_serve_bounds_graceful_shutdown_by_default(captured_run: list[Any], tmp_path: Any) -> None:
    assert serve_command(["--config", str(tmp_path / "config.yaml")]) == 0
    [config] = captured_run
    assert config.timeout_graceful_shutdown == 30.0


def test_graceful_shutdown_bound_comes_from_the_environment(
    captured_run: list[Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERFLOW_GRACEFUL_SHUTDOWN_SECONDS", "2.5")
    assert serve_command(["--config", str(tmp_path / "config.yaml")]) == 0
    assert captured_run[0].timeout_graceful_shutdown == 2.5


def test_a_negative_bound_is_a_startup_error_naming_the_variable(
    captured_run: list[Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("DEERFLOW_GRACEFUL_SHUTDOWN_SECONDS", "-1")
    assert serve_command(["--config", str(tmp_path / "config.yaml")]) == 1
    assert capsys.readouterr().err.startswith("error: DEERFLOW_GRACEFUL_SHUTDOWN_SECONDS='-1': ")
    assert captured_run == []


def _hanging_router(entered: asyncio.Event, outcome: list[str]) -> APIRouter:
    router = APIRouter(prefix="/stuck")

    @router.get("/forever")
    async def forever() -> dict[str, str]:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return {"never": "reached"}

    return router


async def test_a_hanging_extension_route_cannot_block_shutdown(settings_for: Any) -> None:
    import httpx
    import uvicorn

    entered, outcome = asyncio.Event(), []
    settings = settings_for(port=free_port(), graceful_shutdown_seconds=0.5)
    app = create_app(
        settings,
        config=AppConfig(),
        extensions=extensions_with(routers=(_hanging_router(entered, outcome),)),
        agent_host_factory=lambda c, k: FakeAgentHost(),
    )
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", **{**uvicorn_options(settings), "log_level": "warning"}))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(300):
            if server.started:
                break
            await asyncio.sleep(0.02)
        assert server.started
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.port}", timeout=30) as client:
            request = asyncio.create_task(client.get("/stuck/forever"))
            await asyncio.wait_for(entered.wait(), 5)
            started = time.monotonic()
            server.should_exit = True
            await asyncio.wait_for(asyncio.shield(serving), 10)  # unbounded before the fix
            assert time.monotonic() - started < 5
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
    finally:
        if not serving.done():
            server.force_exit = True
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
    assert outcome == ["cancelled"]
    # The host cancelled the request: that is not the extension's failure.
    assert [d for d in app.state.extension_diagnostics if d.phase == "router"] == []


def test_serve_runs_on_uvloop_and_httptools(settings_for: Any) -> None:
    """The Gateway depends on uvicorn's fast event loop and HTTP parser and lets uvicorn pick
    them: on asyncio's loop and h11 a trivial run cost about twice the CPU."""
    import uvicorn

    config = uvicorn.Config(lambda: None, **uvicorn_options(settings_for(port=free_port())))
    config.load()
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    # uvicorn's httptools protocol, with the request-head deadline (adapters/uvicorn_private).
    assert issubclass(config.http_protocol_class, HttpToolsProtocol)
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
