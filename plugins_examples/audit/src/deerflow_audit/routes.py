"""The read-only router: ``GET /api/ext/audit/outcomes``.

It reads through the writer's session factory, so it works once the service has
started and answers 503 (rather than an empty list that looks like "nothing happened")
when it has not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException, Query
from sqlalchemy import select

from .schema import task_outcomes

if TYPE_CHECKING:
    from .service import AuditWriter

__all__ = ["make_router"]


def make_router(writer: AuditWriter) -> APIRouter:
    router = APIRouter(prefix="/api/ext/audit", tags=["audit"])

    @router.get("/outcomes")
    async def list_outcomes(
        run_id: str | None = None,
        thread_id: str | None = None,
        limit: int | None = Query(default=None, gt=0, le=10_000),
    ) -> dict[str, Any]:
        """Recorded task outcomes, newest first."""
        if writer.session_factory is None:
            raise HTTPException(status_code=503, detail="the audit writer has not started")
        query = select(task_outcomes).order_by(task_outcomes.c.id.desc())
        if run_id is not None:
            query = query.where(task_outcomes.c.run_id == run_id)
        if thread_id is not None:
            query = query.where(task_outcomes.c.thread_id == thread_id)
        query = query.limit(limit or writer.settings.list_limit)
        async with writer.session_factory() as session:
            rows = (await session.execute(query)).mappings().all()
        return {
            "outcomes": [
                {**dict(row), "recorded_at": row["recorded_at"].isoformat() if row["recorded_at"] else None}
                for row in rows
            ]
        }

    return router
