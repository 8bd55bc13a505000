"""An extension contributing a router: the access checks must cover its routes too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request

from deerflow_extension_api import extension

router = APIRouter(prefix="/ext")
WRITES: list[bytes] = []


@router.get("/hello")
async def hello() -> dict[str, str]:
    return {"hello": "world"}


@router.get("/odd")
async def odd() -> dict[str, str]:
    return {"text": "half a pair: \ud800"}  # text UTF-8 cannot encode


@router.post("/note")
async def note(request: Request) -> dict[str, int]:
    body = await request.body()
    WRITES.append(body)
    return {"stored": len(body)}


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.routers([router])
