"""Headless Chromium for the Gateway's browser tests: Debian's ``/usr/bin/chromium`` driven
through Playwright for Python (never ``playwright install``: the browser is the system's).

A machine without the browser, Playwright or the page's npm packages skips these tests and
says which is missing; CI installs all three and sets ``DEERFLOW_BROWSER_TESTS=require``
(``.ci/run``), which turns that skip into a failure, so a green CI has really run them.

Pages are served from loopback only, and :func:`loopback_only` aborts (and records) every
request a page makes to any other host, so "renders offline" is checked, not assumed.
"""

from __future__ import annotations

import functools
import io
import ipaddress
import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

__all__ = [
    "CHROMIUM",
    "PAGE_SOURCE",
    "build_page",
    "colours",
    "launched_chromium",
    "loopback_only",
    "require_browser",
    "screenshot_dir",
    "served_from",
]

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
REQUIRE_ENV = "DEERFLOW_BROWSER_TESTS"
PAGE_SOURCE = Path(__file__).resolve().parent / "browser_page"
ESBUILD = PAGE_SOURCE / "node_modules" / ".bin" / "esbuild"


def _missing(*, page: bool) -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
        from PIL import Image  # noqa: F401
    except ImportError as exc:
        return f"Playwright or Pillow is not installed ({exc}); pip install -e '.[test,browser]'"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing; apt-get install -y chromium"
    if page and not ESBUILD.exists():
        return f"the test page's npm packages are missing; npm ci --prefix {PAGE_SOURCE}"
    return None


def require_browser(*, page: bool = False) -> None:
    """Skip (fail when ``$DEERFLOW_BROWSER_TESTS`` is ``require``) if something is missing."""
    reason = _missing(page=page)
    if reason is None:
        return
    if os.environ.get(REQUIRE_ENV) == "require":
        pytest.fail(f"{REQUIRE_ENV}=require but {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def launched_chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(LAUNCH_ARGS))
        try:
            yield browser
        finally:
            browser.close()


def _is_loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_only(context: Any) -> list[str]:
    """Abort every request of ``context`` that would leave this machine; returns their URLs."""
    escaped: list[str] = []

    def route(route: Any) -> None:
        url = route.request.url
        if _is_loopback(url):
            route.continue_()
        else:
            escaped.append(url)
            route.abort()

    context.route("**/*", route)
    return escaped


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def served_from(directory: Path) -> Iterator[str]:
    """Serve ``directory`` as static files on a loopback port of its own: another origin
    than the Gateway's. Named ``localhost`` (the Gateway is ``127.0.0.1``) so the two
    origins differ by host as well as by port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, name="page-origin", daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def build_page(out: Path) -> Path:
    """Bundle the page with esbuild into ``out`` (built per run from the committed sources,
    so no built file lives in git and none can be stale)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PAGE_SOURCE / "index.html", out / "index.html")
    command = [
        str(ESBUILD),
        "src/main.jsx",
        "--bundle",
        "--jsx=automatic",
        "--format=iife",
        '--define:process.env.NODE_ENV="production"',
        f"--outfile={out / 'bundle.js'}",
    ]
    done = subprocess.run(command, cwd=PAGE_SOURCE, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"esbuild failed on {PAGE_SOURCE / 'src/main.jsx'}:\n{done.stderr}")
    return out


def colours(png: bytes) -> Counter[tuple[int, int, int]]:
    """How many pixels of each RGB colour a screenshot has."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        rgb = image.convert("RGB")
        return Counter({colour: count for count, colour in rgb.getcolors(maxcolors=rgb.width * rgb.height)})


def screenshot_dir(fallback: Path) -> Path:
    """``$DEERFLOW_BROWSER_SCREENSHOTS`` when set (to look at them), else the test's tmp dir."""
    chosen = Path(os.environ.get("DEERFLOW_BROWSER_SCREENSHOTS") or fallback)
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen
