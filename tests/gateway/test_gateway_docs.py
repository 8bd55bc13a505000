"""``/docs`` renders with no network: Swagger UI's assets come from the installed
``fastapi-offline`` package, never a CDN; ReDoc, which fetches its logo from its vendor
whatever it is told, is not served.

The HTML check runs everywhere. The browser check opens ``/docs`` in headless Chromium with
every non-loopback request aborted, waits until every operation of ``/openapi.json`` is
drawn, and reads the screenshot's pixels: Swagger UI's GET, POST and DELETE badges are
painted in their own colours, which no blank or half-styled page has.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import colours, launched_chromium, loopback_only, require_browser, screenshot_dir
from sdk_server import SdkServer, sdk_server

pytestmark = pytest.mark.e2e

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
# Swagger UI's method badges (light theme), as its stylesheet paints them.
GET_BLUE, POST_GREEN, DELETE_RED = (0x61, 0xAF, 0xFE), (0x49, 0xCC, 0x90), (0xF9, 0x3E, 0x3E)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    with sdk_server(tmp_path_factory.mktemp("docs")) as running:
        yield running


def root_of(gateway: SdkServer) -> str:
    return gateway.url.removesuffix("/api")


def test_docs_page_references_only_the_gateways_own_assets(gateway: SdkServer) -> None:
    html = httpx.get(root_of(gateway) + "/docs").text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert assets, html
    assert all(asset.startswith("/") for asset in assets), assets
    for asset in assets:
        assert httpx.get(root_of(gateway) + asset).status_code == 200, asset
    assert "cdn." not in html
    assert httpx.get(root_of(gateway) + "/redoc").status_code == 404


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    with launched_chromium() as launched:
        yield launched


@pytest.fixture
def offline_page(browser: Any) -> Iterator[tuple[Any, list[str]]]:
    context = browser.new_context(viewport={"width": 1280, "height": 1600}, color_scheme="light")
    escaped = loopback_only(context)
    try:
        yield context.new_page(), escaped
    finally:
        context.close()


def operation_count(gateway: SdkServer) -> int:
    spec = httpx.get(root_of(gateway) + "/openapi.json").json()
    return sum(1 for item in spec["paths"].values() for method in item if method in HTTP_METHODS)


def test_swagger_ui_draws_every_operation_offline(
    gateway: SdkServer, offline_page: tuple[Any, list[str]], tmp_path: Path
) -> None:
    page, escaped = offline_page
    expected = operation_count(gateway)
    page.goto(root_of(gateway) + "/docs")
    page.wait_for_function(f"document.querySelectorAll('.opblock').length === {expected}", timeout=60_000)
    assert page.locator(".info .title").inner_text().startswith("deerflow-ext Gateway")
    assert page.locator(".opblock-summary-path[data-path='/api/threads/{thread_id}/runs/stream']").count() == 1
    shot = page.screenshot()
    (screenshot_dir(tmp_path) / "docs.png").write_bytes(shot)
    census = colours(shot)
    assert len(census) > 50, f"{len(census)} colours: the page looks blank or unstyled"
    for name, badge in (("GET", GET_BLUE), ("POST", POST_GREEN), ("DELETE", DELETE_RED)):
        assert census[badge] > 200, f"no {name} badge drawn ({census[badge]} pixels of {badge})"
    assert escaped == [], f"the page tried to leave the machine: {escaped}"
