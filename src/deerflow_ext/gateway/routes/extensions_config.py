"""``extensions_config.json``: MCP servers and skills, editable over HTTP.

The file is writable through this API, so it must never be able to load code: the model
forbids unknown keys and has no plugin fields. Python plugins come only from ``config.yaml``,
which is an operator-controlled code execution boundary (spec, runtime slice).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...config.editing import atomic_write

__all__ = [
    "EXTENSIONS_CONFIG_FILE",
    "ExtensionsConfig",
    "McpServer",
    "Skill",
    "read_extensions_config",
    "router",
]

EXTENSIONS_CONFIG_FILE = "extensions_config.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpServer(_Strict):
    enabled: bool = True
    type: Literal["stdio", "sse", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    description: str | None = None


class Skill(_Strict):
    enabled: bool = True


class ExtensionsConfig(_Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    mcp_servers: dict[str, McpServer] = Field(default_factory=dict, alias="mcpServers")
    skills: dict[str, Skill] = Field(default_factory=dict)


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
        raise HTTPException(
            status_code=500, detail=f"{path} is not a valid extensions config: {exc}"
        ) from exc


def write_extensions_config(path: Path, config: ExtensionsConfig) -> None:
    """Write the file as ``config.yaml`` edits are written (``config.editing.atomic_write``):
    atomically, fsynced with its directory, keeping its mode, through a symlink to its target.

    The JSON is rendered in full before anything touches the disk, so a value that cannot be
    serialised fails without a temporary file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(_dump(config), indent=2, sort_keys=True) + "\n")


@router.put("/api/extensions-config")
async def put_extensions_config(request: Request, body: ExtensionsConfig) -> dict[str, Any]:
    await asyncio.to_thread(write_extensions_config, _path(request), body)
    return _dump(body)
