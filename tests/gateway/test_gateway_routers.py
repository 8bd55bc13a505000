"""Contributed routers: mounted after host routes, rejected whole when unsafe."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from deerflow_ext.config.schema import AppConfig, PluginEntry
from deerflow_ext.config.settings import Settings
from deerflow_ext.extensions.serving.services_routers import RouteKey, route_keys
from deerflow_ext.gateway import create_app
from deerflow_ext.gateway.routes import HOST_ROUTERS, threads_router

CASES = {
    "shadowing": ("install_shadowing", "conflicts with the earlier route /api/threads/{thread_id}"),
    "shadowed": ("install_shadowed", "conflicts with the earlier route /api/threads/{thread_id}"),
    "duplicate": ("install_duplicate", "route GET /acme/ping conflicts with the earlier route /acme/ping"),
    "websocket": ("install_websocket", "WebSocket"),
    "mount": ("install_mount", "Mount"),
    "lifespan": ("install_lifespan", "lifespan"),
    "nested_lifespan": ("install_nested_lifespan", "lifespan"),
    "startup": ("install_startup", "startup/shutdown handlers"),
}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(config=tmp_path / "config.yaml", database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")


def _config(*names: str) -> AppConfig:
    return AppConfig(
        plugins=[PluginEntry(name=n.removeprefix("install_"), use=f"gateway.gw_fixtures:{n}") for n in names]
    )


@pytest.mark.parametrize("case", sorted(CASES))
async def test_unsafe_router_is_rejected_while_a_good_one_mounts(settings, case: str) -> None:
    installer, reason = CASES[case]
    app = create_app(settings, config=_config("install_good", installer, "install_other_method"))
    use = f"gateway.gw_fixtures:{installer}"
    assert app.state.extensions.loaded == (
        "gateway.gw_fixtures:install_good",
        use,
        "gateway.gw_fixtures:install_other_method",
    )
    diagnostics = [d for d in app.state.extension_diagnostics if d.phase == "router"]
    assert [d.extension for d in diagnostics] == [use]
    assert reason in diagnostics[0].message and diagnostics[0].message.startswith("router rejected: ")
    mounted = [c.extension for c in app.state.mounted_routers]
    assert mounted == ["gateway.gw_fixtures:install_good", "gateway.gw_fixtures:install_other_method"]

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert (await client.get("/acme/ping")).json() == {"pong": "acme"}
        assert (await client.post("/acme/ping")).json() == {"posted": "yes"}
        # Nothing of the rejected router is reachable, not even its harmless routes.
        for path in (
            "/ws-ext/info",
            "/mount-ext/info",
            "/lifespan-ext/info",
            "/nested-lifespan-ext/inner/info",
            "/startup-ext/info",
        ):
            assert (await client.get(path)).status_code == 404


async def test_a_router_that_includes_another_mounts(settings) -> None:
    app = create_app(settings, config=_config("install_nested"))
    assert not [d for d in app.state.extension_diagnostics if d.phase == "router"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert (await client.get("/nested-ext/inner/info")).json() == {"nested": "yes"}


def test_host_routes_come_first(settings) -> None:
    app = create_app(settings, config=_config("install_good"))
    paths = [key.path for key in route_keys(app.router.routes)]
    assert paths.index("/health") < paths.index("/acme/ping")
    assert paths.index("/api/threads/{thread_id}/runs/{run_id}/cancel") < paths.index("/acme/ping")


def _clashes(routers: list[Any]) -> list[tuple[str, str]]:
    """Paths of different routers one request path could reach, whatever its method."""
    keys = [[dataclasses.replace(key, methods=frozenset({"ANY"})) for key in route_keys(r.routes)] for r in routers]
    pairs = [(a, b) for i, mine in enumerate(keys) for other in keys[i + 1 :] for a in mine for b in other]
    return [(a.path, b.path) for a, b in pairs if a.overlaps(b)]


def test_host_routers_are_disjoint_so_their_order_decides_only_speed() -> None:
    """``HOST_ROUTERS`` puts the hottest first; no path of one may be a path of
    another, or the order would decide which route answers (or which 405 it gives)."""
    assert sum(len(route_keys(r.routes)) for r in HOST_ROUTERS) >= 30  # every host route is seen
    assert _clashes(list(HOST_ROUTERS)) == []
    assert _clashes([threads_router, threads_router])  # the check sees a clash where there is one


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("/api/threads/{thread_id}", "/api/threads/{tid}", True),
        ("/api/threads/{thread_id}", "/api/threads/search", True),
        ("/api/threads/{thread_id}/runs", "/api/threads/{x}/audit", False),
        ("/files/{p:path}", "/files/a/b/c", True),
        ("/a/b", "/a/b/c", False),
        ("/a", "/b", False),
    ],
)
def test_route_overlap(a: str, b: str, overlap: bool) -> None:
    from deerflow_ext.extensions.serving.services_routers import _normalise

    get = frozenset({"GET", "HEAD"})
    assert RouteKey(get, _normalise(a), a).overlaps(RouteKey(get, _normalise(b), b)) is overlap
    assert not RouteKey(frozenset({"POST"}), _normalise(a), a).overlaps(RouteKey(get, _normalise(b), b))
