"""``/api/plugins``: what the browser needs of the full-stack plugins, and their actions.

Four routes, DeerFlow's (digest §4.3, §4.6), every one for an authenticated principal only
(401 otherwise):

- ``GET /api/plugins``: one card per installed plugin, enabled or not: its browser entry
  (packaged assets, an inline module, or none), the settings its browser may see, and its
  action names. Never cached (``private, no-store``): it changes with the deployment.
- ``GET /api/plugins/modules/{module}/{revision}.mjs``: an inline module, by the sha256 of
  its code, so a stale page asks for a revision that no longer exists (404) and reloads.
- ``GET /api/plugins/{namespace}/assets/{revision}/{path}``: a file of the snapshot taken at
  registration, immutable for a year under its revision, sandboxed (``Content-Security-Policy:
  sandbox``) and never sniffed, so a packaged file cannot run as a page of this origin.
- ``POST /api/plugins/{namespace}/actions/{action}``: in this order: the viewer header check
  (409: the page belongs to another account), unknown plugin or action (404), disabled (403),
  the ``authorization:`` roles (403 "Plugin action not permitted for your role.", decided
  before a byte of the body is read), then the body, streamed and cut at 256 KiB (413), a
  JSON object (422), the handler under 30 s (504), its ``ValueError`` as 422, an
  ``AgentRunError``/``BatchResultError`` as its own status, and any other failure 502
  without detail (the handler's text may be private).

Assets are served even when the plugin is disabled, as in DeerFlow: listed files are public
to every authenticated user. The host's ``door`` dependency checks these routes' parameters
but leaves the body to the action route: it must not be read before the action is admitted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from deerflow_extension_api import (
    ActionContext,
    AgentRunError,
    BatchResultError,
    BrowserModule,
    ExtensionPrincipal,
    require_batch_results,
    resolve_agent_runs,
    resolve_principal,
)

from ...extensions.contract.snapshot import LoadedExtensions
from ...extensions.full_stack.browser_assets import LoadedBrowserAssets, valid_asset_path
from ...extensions.full_stack.registration import RegisteredPlugin
from ..plugin_authorization import plugin_action_allowed

__all__ = ["ACTION_TIMEOUT_SECONDS", "MAX_ACTION_BODY_BYTES", "VIEWER_HEADER", "router"]

logger = logging.getLogger("deerflow_ext.gateway")

router = APIRouter(prefix="/api/plugins", tags=["plugins"])

MAX_ACTION_BODY_BYTES = 256 * 1024
ACTION_TIMEOUT_SECONDS = 30.0
VIEWER_HEADER = "x-deerflow-plugin-viewer"

_NO_STORE = {"Cache-Control": "private, no-store"}
_IMMUTABLE = {
    "Cache-Control": "private, max-age=31536000, immutable",
    "Vary": "Cookie, Authorization",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox",
}


def _principal(request: Request) -> ExtensionPrincipal:
    principal = resolve_principal(request)
    if principal is None:
        raise HTTPException(401, "Authentication required.")
    return principal


def _plugins(request: Request) -> tuple[RegisteredPlugin, ...]:
    extensions: LoadedExtensions = request.app.state.extensions
    return tuple(c.contributor for c in extensions.plugins)


def _inline_revision(module: BrowserModule) -> str:
    return hashlib.sha256(module.code.encode("utf-8")).hexdigest()


def _card(plugin: RegisteredPlugin, viewer: str) -> dict[str, Any]:
    frontend = plugin.frontend
    module: str | None = None
    entry: str | None = None
    transport: str | None = None
    public: tuple[str, ...] = ()
    if isinstance(frontend, LoadedBrowserAssets):
        module, transport, public = frontend.module, "assets-v1", frontend.public_fields
        entry = f"/api/plugins/{plugin.namespace}/assets/{frontend.revision}/{frontend.entry}"
    elif isinstance(frontend, BrowserModule):
        module, transport, public = frontend.module, "inline-v1", frontend.public_fields
        entry = f"/api/plugins/modules/{frontend.module}/{_inline_revision(frontend)}.mjs"
    contribution = plugin.contribution
    return {
        "namespace": plugin.namespace,
        "title": contribution.title,
        "description": contribution.description,
        "viewer_id": viewer,
        "module": module,
        "entry": entry,
        "transport": transport,
        "settings": {key: plugin.settings[key] for key in ("enabled", *public) if key in plugin.settings},
        "backend_actions": [action.name for action in contribution.backend],
    }


@router.get("")
async def list_plugins(request: Request) -> JSONResponse:
    """Every installed plugin, enabled or not; model tools are not listed."""
    principal = _principal(request)
    cards = [_card(plugin, principal.user_id) for plugin in _plugins(request)]
    return JSONResponse(cards, headers=_NO_STORE)


@router.get("/modules/{module}/{revision}.mjs")
async def inline_module(module: str, revision: str, request: Request) -> Response:
    """An inline browser module, by module id and the sha256 of its code."""
    _principal(request)
    for plugin in _plugins(request):
        frontend = plugin.frontend
        if isinstance(frontend, BrowserModule) and frontend.module == module and _inline_revision(frontend) == revision:
            return Response(
                frontend.code,
                media_type="text/javascript",
                headers={**_NO_STORE, "X-Content-Type-Options": "nosniff"},
            )
    raise HTTPException(404, "Plugin module unavailable; reload the page.", headers=_NO_STORE)


@router.get("/{namespace}/assets/{revision}/{path:path}")
async def asset(namespace: str, revision: str, path: str, request: Request) -> Response:
    """One file of a plugin's packaged-assets snapshot."""
    _principal(request)
    if valid_asset_path(path):
        for plugin in _plugins(request):
            frontend = plugin.frontend
            if plugin.namespace == namespace and isinstance(frontend, LoadedBrowserAssets):
                found = frontend.files.get(path) if frontend.revision == revision else None
                if found is not None:
                    return Response(found.content, media_type=found.media_type, headers=_IMMUTABLE)
    raise HTTPException(404, "Plugin asset unavailable; reload the page.", headers=_NO_STORE)


@router.post("/{namespace}/actions/{action_name}")
async def invoke_action(namespace: str, action_name: str, request: Request) -> Response:
    """Run one backend action for the principal (the checks are in the module docstring)."""
    principal = _principal(request)
    viewer = request.headers.get(VIEWER_HEADER)
    if viewer is not None and viewer != principal.user_id:
        raise HTTPException(409, "Account changed; reload this plugin view.")
    plugin = next((p for p in _plugins(request) if p.namespace == namespace), None)
    if plugin is None:
        raise HTTPException(404, "Plugin is not installed.")
    action = next((a for a in plugin.contribution.backend if a.name == action_name), None)
    if action is None:
        raise HTTPException(404, "Plugin action is not installed.")
    if plugin.settings.get("enabled") is not True:
        raise HTTPException(403, "Plugin disabled by administrator.")
    # Decided before the body is read: a refused caller's upload is never taken.
    if not plugin_action_allowed(request.app.state.config.authorization, principal, namespace, action_name):
        raise HTTPException(403, "Plugin action not permitted for your role.")
    payload = _json_object(await _read_body(request))
    runs = resolve_agent_runs(request)
    for_plugin = getattr(runs, "for_plugin", None)  # the host's handle marks the plugin's runs
    context = ActionContext(
        principal,
        plugin.settings,
        agent_runs=for_plugin(namespace) if callable(for_plugin) else runs,
        batch_results=lambda: require_batch_results(request),
    )
    try:
        async with asyncio.timeout(ACTION_TIMEOUT_SECONDS):
            result = await action.handler(MappingProxyType(payload), context)
    except (AgentRunError, BatchResultError) as exc:
        raise HTTPException(_status(exc.status_code), str(exc)) from None
    except TimeoutError:
        raise HTTPException(504, "Plugin action timed out.") from None
    except ValueError:
        raise HTTPException(422, "Invalid plugin action input.") from None
    except Exception as exc:  # the plugin's failure: logged by type, never shown
        logger.warning("plugin action %s/%s failed: %s", namespace, action_name, type(exc).__name__)
        raise HTTPException(502, "Plugin action failed.") from None
    try:
        body = json.dumps(result, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:  # what it returned is not JSON
        logger.warning("plugin action %s/%s returned %s", namespace, action_name, type(exc).__name__)
        raise HTTPException(502, "Plugin action failed.") from None
    return Response(body, media_type="application/json")


async def _read_body(request: Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_ACTION_BODY_BYTES:
            raise HTTPException(413, "Plugin action input exceeds 256 KiB.")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        raise HTTPException(422, "Plugin action requires a JSON object.")
    return payload


def _status(code: object) -> int:
    """A handler's error status, kept when it is a client or availability error."""
    return code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 502
