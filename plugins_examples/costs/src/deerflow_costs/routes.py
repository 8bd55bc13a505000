"""``GET /api/ext/costs/totals``: the process-wide totals and their estimated cost."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from .accounting import CostTotals, Prices
from .contributions import StoreHandle

__all__ = ["make_router"]


def make_router(handle: StoreHandle, prices: Prices | None = None) -> APIRouter:
    router = APIRouter(prefix="/api/ext/costs", tags=["costs"])

    @router.get("/totals")
    async def totals() -> dict[str, Any]:
        """Tokens, model calls and tool calls of every finished task since the Gateway started."""
        if handle.app_store is None:
            raise HTTPException(status_code=503, detail="the costs extension has not started")
        aggregate = handle.app_store.get(CostTotals) or CostTotals()
        return aggregate.snapshot(prices)

    return router
