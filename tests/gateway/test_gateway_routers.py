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
from live_uvicorn import live_server

CASES = {
    "shadowing": ("install_shadowing", "conflicts with the earlier route /api/threads/{thread_id} of the host"),
    "shadowed": ("install_shadowed", "conflicts with the earlier route /api/threads/{thread_id} of the host"),
    "duplicate": (
        "install_duplicate",
        "route GET /acme/ping conflicts with the earlier route /acme/ping of extension "
        "gateway.gw_fixtures:install_good",
    ),
    "non_callable": ("install_non_callable", "route /broken-ext/gone has an endpoint that is not callable (NoneType)"),
    "unbuildable": ("install_unbuildable", "FastAPIError: "),
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
            "/broken-ext/fine",
            "/unbuildable-ext/fine",
            "/ws-ext/info",
            "/mount-ext/info",
            "/lifespan-ext/info",
            "/nested-lifespan-ext/inner/info",
            "/startup-ext/info",
        ):
            assert (await client.get(path)).status_code == 404
        # A route FastAPI builds lazily used to fail every request that got past the host's
        # routes (500), other extensions' and unknown paths included; now nothing of it is left.
        assert (await client.get("/no-such-path")).status_code == 404
    assert not [key.path for key in route_keys(app.router.routes) if key.path.startswith(("/broken", "/unbuildable"))]


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


async def test_overlapping_templates_mount_and_answer_in_declaration_order(settings) -> None:
    """``/items/search`` before ``/items/{id}`` is how FastAPI APIs are written: a route is
    a conflict only when an earlier one takes every request it matches (it could never answer)."""
    app = create_app(settings, config=_config("install_in_order"))
    assert not [d.message for d in app.state.extension_diagnostics if d.phase == "router"]
    expected = {
        "/items/search": {"route": "items/search"},
        "/items/42": {"route": "items/{item_id}", "item_id": "42"},
        "/records/7": {"route": "records/{v:int}", "v": 7},
        "/records/new": {"route": "records/new"},
        "/files/a/b": {"route": "files/{rest:path}", "rest": "a/b"},
        "/files/x": {"route": "files/{rest:path}", "rest": "x"},  # the earlier route wins
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        for path, answer in expected.items():
            assert (await client.get(path)).json() == answer, path


async def test_a_conflict_names_the_extension_that_holds_the_earlier_route(settings) -> None:
    app = create_app(settings, config=_config("install_good", "install_duplicate", "install_shadowing"))
    messages = {d.extension: d.message for d in app.state.extension_diagnostics if d.phase == "router"}
    assert messages == {
        "gateway.gw_fixtures:install_duplicate": "router rejected: route GET /acme/ping conflicts with the earlier "
        "route /acme/ping of extension gateway.gw_fixtures:install_good",
        "gateway.gw_fixtures:install_shadowing": "router rejected: route GET /api/threads/{tid} conflicts with the "
        "earlier route /api/threads/{thread_id} of the host",
    }


TOKEN = "a-test-token-of-some-length"

RESERVED = {
    ("POST", "/health"): "route /health can answer the host's /health",
    ("POST", "/ok"): "route /ok can answer the host's /ok",
    ("PUT", "/api/ok"): "route /api/ok can answer the host's /api/ok",
    ("POST", "/openapi.json"): "route /openapi.json can answer the host's /openapi.json",
    ("POST", "/docs"): "route /docs can answer the host's /docs",
    ("DELETE", "/{anything}"): "route /{anything} can answer the host's /docs",
    ("POST", "/static-offline-docs/ext"): "route /static-offline-docs/ext lies under the host's mount "
    "/static-offline-docs, which answers first: unreachable",
    ("GET", "/{section}/ext"): "route /{section}/ext lies under the host's mount /static-offline-docs",
}


@pytest.mark.parametrize(("method", "path"), sorted(RESERVED))
async def test_a_route_on_a_path_served_without_the_token_is_refused(tmp_path, method: str, path: str) -> None:
    """Liveness, the docs and their assets answer without the API token (access.py), and
    a host Mount answers every path below it: an extension route there is refused whole."""
    settings = Settings(
        config=tmp_path / "config.yaml",
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}",
        api_token=TOKEN,
    )
    entry = PluginEntry(
        name="reserved", use="gateway.gw_fixtures:install_route", config={"method": method, "path": path}
    )
    app = create_app(settings, config=AppConfig(plugins=[entry]))
    [diagnostic] = [d for d in app.state.extension_diagnostics if d.phase == "router"]
    assert diagnostic.message.startswith(f"router rejected: {RESERVED[method, path]}")
    assert app.state.mounted_routers == ()
    concrete = path.replace("{anything}", "ok").replace("{section}", "static-offline-docs")
    async with live_server(app) as live, live.client() as client:  # the real server, token in force
        answer = await client.request(method, concrete)  # no token
        assert answer.status_code != 200 and "answered_by" not in answer.text, answer.text
        answer = await client.request(method, concrete, headers={"Authorization": f"Bearer {TOKEN}"})
        assert "answered_by" not in answer.text, answer.text
        assert (await client.get("/ok")).status_code == 200  # the host's own still answer


@pytest.mark.parametrize(
    ("earlier", "later", "shadowed"),
    [
        ("/api/threads/{thread_id}", "/api/threads/{tid}", True),  # the same template
        ("/api/threads/{thread_id}", "/api/threads/search", True),  # a literal the parameter takes
        ("/items/search", "/items/{item_id}", False),  # FastAPI's order: both answer
        ("/records/{v:int}", "/records/new", False),  # "new" is no int
        ("/records/{v:int}", "/records/7", True),
        ("/records/{v}", "/records/{n:int}", True),  # every int is a str
        ("/records/{n:int}", "/records/{v}", False),
        ("/files/{rest:path}", "/files/{file_id}", False),  # a {path} matches no newline; {str} does
        ("/files/{rest:path}", "/files/a/b", True),
        ("/files/{rest:path}", "/files/{n:int}/raw", True),
        ("/v/{x}", "/v/v{n:int}", True),
        ("/v/{n:int}", "/v/v{m:int}", False),
        ("/a/{x}", "/a/{x}/", False),  # a trailing slash routes apart
        ("/a/{x}", "/a/{x}/b", False),
    ],
)
def test_a_route_is_shadowed_only_when_an_earlier_one_takes_all_its_requests(
    earlier: str, later: str, shadowed: bool
) -> None:
    from deerflow_ext.extensions.serving.services_routers import _normalise

    get = frozenset({"GET", "HEAD"})
    key = RouteKey(get, _normalise(later), later)
    assert key.shadowed_by(RouteKey(get, _normalise(earlier), earlier)) is shadowed
    assert not key.shadowed_by(RouteKey(frozenset({"POST"}), _normalise(earlier), earlier))
