"""``extensions_config.json``: MCP servers and skills, editable over HTTP.

The file is writable through this API, so it must never be able to load code: the model
forbids unknown keys and has no plugin fields. Python plugins come only from ``config.yaml``,
which is an operator-controlled code execution boundary (spec, runtime slice).

What may be written is bounded too: names are identifiers, URLs are http(s), every string
and list has a length limit, and the rendered file at most :data:`MAX_FILE_BYTES` (413), so a
caller cannot fill the disk or plant text other tools choke on (the door has already refused
NULs and lone surrogates).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...config.editing import atomic_write

__all__ = [
    "EXTENSIONS_CONFIG_FILE",
    "MAX_FILE_BYTES",
    "ExtensionsConfig",
    "McpServer",
    "Skill",
    "read_extensions_config",
    "router",
]

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


@router.get("/api/extensions-config")
async def get_extensions_config(request: Request) -> dict[str, Any]:
    path = _path(request)
    try:
        return _dump(await asyncio.to_thread(read_extensions_config, path))
    except (ValueError, ValidationError) as exc:
        raise HTTPException(status_code=500, detail=f"{path} is not a valid extensions config: {exc}") from exc


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
async def put_extensions_config(request: Request, body: ExtensionsConfig) -> dict[str, Any]:
    size = len(_render(body).encode())
    if size > MAX_FILE_BYTES:
        raise HTTPException(
            status_code=413, detail=f"{EXTENSIONS_CONFIG_FILE} would be {size} bytes; at most {MAX_FILE_BYTES}"
        )
    await asyncio.to_thread(write_extensions_config, _path(request), body)
    return _dump(body)
