"""An extension with two routes that read the request's principal (``test_identity_principal``):
``/identity-test/whoami`` answers it, ``/identity-test/admin`` is for administrators only.

A module of its own, importing no ``conftest``: the loader imports it as
``gateway.identity_routes_ext``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from deerflow_extension_api import require_admin, resolve_principal

router = APIRouter(prefix="/identity-test")


@router.get("/whoami")
async def whoami(request: Request) -> dict[str, Any]:
    principal = resolve_principal(request)
    if principal is None:
        return {"principal": None}
    return {"user_id": principal.user_id, "is_admin": principal.is_admin, "roles": list(principal.roles)}


@router.get("/admin")
async def admin_only(request: Request) -> dict[str, str]:
    try:
        return {"admin": require_admin(request).user_id}
    except PermissionError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc


def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.routers([router])
