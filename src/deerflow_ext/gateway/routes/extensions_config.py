"""``extensions_config.json``: MCP servers and skills, editable over HTTP.

The file is writable through this API, so it must never be able to load code: the model
forbids unknown keys and has no plugin fields. Python plugins come only from ``config.yaml``,
which is an operator-controlled code execution boundary (spec, runtime slice).

What may be written is bounded too: names are identifiers, URLs are http(s), every string
and list has a length limit, and the rendered file at most :data:`MAX_FILE_BYTES` (413), so a
caller cannot fill the disk or plant text other tools choke on (the door has already refused
NULs and lone surrogates).

Writers take turns: every write — ``PUT`` here, ``deerflow-ext extensions skill|mcp`` on the
command line — reads, changes and replaces the file holding ``config.editing``'s lock on
it, so the file is never torn and two writers never interleave. A read-modify-write client
sends back the ``ETag`` it read as ``If-Match``; if another writer changed the file since,
its ``PUT`` is refused with 412 naming both revisions instead of silently undoing that
change. A ``PUT`` without ``If-Match`` replaces whatever is there.

An MCP stdio server runs a command, so a ``PUT`` whose stdio server has a new or changed
``command``, ``args`` or ``env`` is refused (422) unless ``config.yaml`` allows that command,
and a new or changed remote URL must pass the webhooks' URL policy (``url_policy``, applied by
``mcp_servers/policy.py``, which also reads ``mcp.allowed_url_prefixes``);
enabling, disabling and removing are free. The check compares with the file as it is under
the lock. ``GET /api/extensions-config/mcp-servers`` shows what this process made of each
server (state, tools, last error; never an ``env`` or header value).

``If-Match`` is read as RFC 9110 (13.1.1) says: a comma-separated list of entity tags, any
of which may match, compared strongly (a weak tag, ``W/"…"``, never matches: the revision is
a digest of the file's bytes, so only an exact one proves nothing changed), and ``*``, which
holds only while the file exists (the ``"absent"`` tag a ``GET`` of a missing file gave
still matches it: that client read the absence). A header that is no such list is a 400.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...config.editing import atomic_write, config_lock
from ...mcp_servers import http_write_refusals
from ...url_policy import UrlPolicy
from ..scoping import admin_only

__all__ = [
    "EXTENSIONS_CONFIG_FILE",
    "MAX_FILE_BYTES",
    "ExtensionsConfig",
    "IfMatch",
    "McpServer",
    "RefusedWriteError",
    "Skill",
    "StaleRevisionError",
    "add_mcp_server",
    "read_extensions_config",
    "remove_mcp_server",
    "revision_of",
    "router",
    "set_entry_enabled",
    "update_extensions_config",
]

ABSENT = "absent"
"""The revision of a file that does not exist."""

EXTENSIONS_CONFIG_FILE = "extensions_config.json"
MAX_FILE_BYTES = 256 * 1024

_Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@/-]{0,127}$")]
_EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
_HeaderName = Annotated[str, Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")]
_Text = Annotated[str, Field(max_length=4096)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpServer(_Strict):
    enabled: bool = True
    type: Literal["stdio", "sse", "http"] = "stdio"
    command: _Text | None = Field(default=None, min_length=1)
    args: list[_Text] = Field(default_factory=list, max_length=256)
    env: dict[_EnvName, _Text] = Field(default_factory=dict, max_length=256)
    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", max_length=2048)
    headers: dict[_HeaderName, _Text] = Field(default_factory=dict, max_length=64)
    description: _Text | None = None


class Skill(_Strict):
    enabled: bool = True


class ExtensionsConfig(_Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    mcp_servers: dict[_Name, McpServer] = Field(default_factory=dict, alias="mcpServers", max_length=256)
    skills: dict[_Name, Skill] = Field(default_factory=dict, max_length=1024)


router = APIRouter(tags=["extensions-config"])


def _path(request: Request) -> Path:
    return Path(request.app.state.extensions_config_path)


def read_extensions_config(path: Path) -> ExtensionsConfig:
    if not path.exists():
        return ExtensionsConfig()
    return ExtensionsConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))


def _dump(config: ExtensionsConfig) -> dict[str, Any]:
    return config.model_dump(by_alias=True)


@dataclass(frozen=True)
class IfMatch:
    """A writer's precondition: the revisions it accepts (strong tags), or ``any`` (``*``:
    whichever, as long as the file exists)."""

    tags: frozenset[str] = frozenset()
    any: bool = False

    def holds(self, current: str) -> bool:
        return current != ABSENT if self.any else current in self.tags

    def __str__(self) -> str:
        return "*" if self.any else ", ".join(sorted(self.tags)) or "(none)"


class StaleRevisionError(Exception):
    """The file changed since the revision the writer read (``If-Match``)."""

    def __init__(self, expected: str | IfMatch, current: str) -> None:
        if isinstance(expected, IfMatch) and expected.any:
            message = (
                f"{EXTENSIONS_CONFIG_FILE} does not exist, and If-Match: * asks for one; send no If-Match to create it"
            )
        else:
            message = (
                f"{EXTENSIONS_CONFIG_FILE} changed since revision {expected} (it is now {current}); "
                f'read it again, re-apply your change and send If-Match: "{current}"'
            )
        super().__init__(message)
        self.current = current


def revision_of(raw: bytes | None) -> str:
    """The file's revision (its ETag): a digest of its bytes, ``absent`` when there is none."""
    return ABSENT if raw is None else hashlib.sha256(raw).hexdigest()[:20]


def _parse(raw: bytes | None) -> ExtensionsConfig:
    if raw is None:
        return ExtensionsConfig()
    return ExtensionsConfig.model_validate(json.loads(raw.decode("utf-8")))


class RefusedWriteError(ValueError):
    """What an HTTP caller may not write (``mcp_servers/policy.py``), one line per server."""

    def __init__(self, refusals: list[str]) -> None:
        super().__init__("; ".join(refusals))
        self.refusals = refusals


def update_extensions_config(
    path: Path,
    change: Callable[[ExtensionsConfig], ExtensionsConfig] | ExtensionsConfig,
    *,
    expected: str | IfMatch | None = None,
    check: Callable[[Any, dict[str, Any]], list[str]] | None = None,
) -> tuple[ExtensionsConfig, str]:
    """Read, change and replace the file under its lock; the new content and revision.

    ``change`` is the new content, or a function of the current one (which may raise a
    ``ValueError`` naming what is wrong: the file is then left as it was). A replacement does
    not read the old content, so it can repair a file that no longer parses. ``expected`` is
    the revision the caller read (or an ``If-Match`` precondition): :class:`StaleRevisionError`
    when the file has another now. ``check(current, new)`` is handed the file's document
    now (None when there is none or it does not parse) and the new one, under the lock; what
    it answers refuses the write (:class:`RefusedWriteError`).
    """
    if isinstance(expected, str):
        expected = IfMatch(frozenset({expected}))
    path.parent.mkdir(parents=True, exist_ok=True)
    with config_lock(path):
        raw = path.read_bytes() if path.exists() else None
        current = revision_of(raw)
        if expected is not None and not expected.holds(current):
            raise StaleRevisionError(expected, current)
        updated = change if isinstance(change, ExtensionsConfig) else change(_parse(raw))
        if check is not None:
            refusals = check(_document(raw), _dump(updated))
            if refusals:
                raise RefusedWriteError(refusals)
        text = _render(updated)
        size = len(text.encode())
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{EXTENSIONS_CONFIG_FILE} would be {size} bytes; at most {MAX_FILE_BYTES}")
        atomic_write(path, text)
    return updated, revision_of(text.encode())


def _document(raw: bytes | None) -> Any:
    try:
        return None if raw is None else json.loads(raw.decode("utf-8"))
    except ValueError:
        return None


def set_entry_enabled(
    config: ExtensionsConfig, kind: Literal["skill", "mcp"], name: str, enabled: bool
) -> ExtensionsConfig:
    """``config`` with skill or MCP server ``name`` switched on or off; an unknown skill is
    added, an unknown MCP server is a ``ValueError`` (it needs a command or a URL)."""
    data = _dump(config)
    section = data["skills"] if kind == "skill" else data["mcpServers"]
    if name not in section and kind == "mcp":
        raise ValueError(
            f"no MCP server {name!r} in {EXTENSIONS_CONFIG_FILE}; add it first (PUT /api/extensions-config)"
        )
    section[name] = {**section.get(name, {}), "enabled": enabled}
    return ExtensionsConfig.model_validate(data)


def add_mcp_server(config: ExtensionsConfig, name: str, entry: dict[str, Any]) -> ExtensionsConfig:
    """``config`` with MCP server ``name`` set to ``entry`` (added, or replaced whole)."""
    data = _dump(config)
    data["mcpServers"][name] = entry
    return ExtensionsConfig.model_validate(data)


def remove_mcp_server(config: ExtensionsConfig, name: str) -> ExtensionsConfig:
    """``config`` without MCP server ``name``; a ``ValueError`` when there is none."""
    data = _dump(config)
    if data["mcpServers"].pop(name, None) is None:
        raise ValueError(f"no MCP server {name!r} in {EXTENSIONS_CONFIG_FILE}")
    return ExtensionsConfig.model_validate(data)


def _etag(revision: str) -> str:
    return f'"{revision}"'


_ENTITY_TAG = re.compile(r'[ \t]*(?:(W/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(?:,|$)')


def _if_match(value: str | None) -> IfMatch | None:
    """The ``If-Match`` header as a precondition (RFC 9110 13.1.1), None when absent; a 400
    when it is neither ``*`` nor a list of entity tags. Weak tags are kept out: under the
    strong comparison If-Match uses they match nothing (all of them weak: nothing holds)."""
    if value is None:
        return None
    if value.strip(" \t") == "*":
        return IfMatch(any=True)
    tags: set[str] = set()
    position, seen = 0, False
    while position < len(value):
        found = _ENTITY_TAG.match(value, position)
        if found is None or found.end() == position:
            raise HTTPException(
                status_code=400,
                detail=f"If-Match: {value[:80]!r} is not '*' or a comma-separated list of entity tags (\"…\")",
            )
        position = found.end()
        if found.group(2) is not None:
            seen = True
            if found.group(1) is None:
                tags.add(found.group(2))
    if not seen:
        raise HTTPException(status_code=400, detail="If-Match: names no entity tag")
    return IfMatch(frozenset(tags))


@router.get("/api/extensions-config")
async def get_extensions_config(request: Request, response: Response) -> dict[str, Any]:
    admin_only(request)
    path = _path(request)

    def read() -> tuple[ExtensionsConfig, str]:
        raw = path.read_bytes() if path.exists() else None
        return _parse(raw), revision_of(raw)

    try:
        config, revision = await asyncio.to_thread(read)
    except (ValueError, ValidationError) as exc:
        raise HTTPException(status_code=500, detail=f"{path} is not a valid extensions config: {exc}") from exc
    response.headers["ETag"] = _etag(revision)
    return _dump(config)


def write_extensions_config(path: Path, config: ExtensionsConfig) -> None:
    """Write the file as ``config.yaml`` edits are written (``config.editing.atomic_write``):
    atomically, fsynced with its directory, keeping its mode, through a symlink to its target.

    The JSON is rendered in full before anything touches the disk, so a value that cannot be
    serialised fails without a temporary file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, _render(config))


def _render(config: ExtensionsConfig) -> str:
    return json.dumps(_dump(config), indent=2, sort_keys=True) + "\n"


@router.put("/api/extensions-config")
async def put_extensions_config(
    request: Request,
    response: Response,
    body: ExtensionsConfig,
    if_match: Annotated[str | None, Header(alias="If-Match")] = None,
) -> dict[str, Any]:
    admin_only(request)
    size = len(_render(body).encode())
    if size > MAX_FILE_BYTES:
        raise HTTPException(
            status_code=413, detail=f"{EXTENSIONS_CONFIG_FILE} would be {size} bytes; at most {MAX_FILE_BYTES}"
        )
    config = request.app.state.config
    mcp, urls = config.mcp, UrlPolicy.of(config.webhooks.url)

    def check(current: Any, new: dict[str, Any]) -> list[str]:
        return http_write_refusals(current, new, mcp, urls)  # on the worker thread: it may look a name up

    try:
        _, revision = await asyncio.to_thread(
            update_extensions_config, _path(request), body, expected=_if_match(if_match), check=check
        )
    except StaleRevisionError as exc:
        raise HTTPException(status_code=412, detail=str(exc), headers={"ETag": _etag(exc.current)}) from exc
    except RefusedWriteError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    response.headers["ETag"] = _etag(revision)
    return _dump(body)


@router.get("/api/extensions-config/mcp-servers")
async def mcp_server_states(request: Request) -> dict[str, Any]:
    """Each MCP server of the file and what this Gateway process made of it."""
    runtime = request.app.state.runtime
    servers = getattr(getattr(runtime, "agent_host", None), "mcp_servers", None)
    if servers is None:
        return {"servers": [], "file_error": None}
    return {"servers": [status.as_dict() for status in servers.statuses()], "file_error": servers.file_error}
