"""``GET /api/ext/otel/spans``: the in-memory spans as JSON, for end-to-end checks."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from .exporting import OtelSettings, finished_spans, span_to_dict

__all__ = ["make_router"]


def make_router(settings: OtelSettings) -> APIRouter:
    router = APIRouter(prefix="/api/ext/otel", tags=["otel"])

    @router.get("/spans")
    async def spans(name: str | None = None) -> dict[str, Any]:
        """Finished spans (only the ``memory`` exporter keeps them); optionally filtered by name prefix."""
        if settings.exporter != "memory":
            return {"exporter": settings.exporter, "spans": []}
        found = [span_to_dict(s) for s in finished_spans() if name is None or s.name.startswith(name)]
        return {"exporter": settings.exporter, "spans": found}

    return router
