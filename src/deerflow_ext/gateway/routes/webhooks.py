"""``GET /api/webhooks``: the operator's view of the webhook outbox (``deerflow_ext.webhooks``).

How many deliveries are pending, delivered and failed, and the most recent ones (``status``
and ``run_id`` filter them): for each, its URL, attempts, when it is next due, the receiver's
last status code and the last error. Guarded like ``/api/extensions`` (the API token when
one is set). ``/metrics`` counts attempts and settled deliveries
(``deerflow_webhook_attempts_total``, ``deerflow_webhook_deliveries_total``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request

from ...webhooks import WebhookService
from ..state import runtime_of

__all__ = ["router"]

router = APIRouter(tags=["operator"])


@router.get("/api/webhooks")
async def list_webhooks(
    request: Request,
    status: Literal["pending", "delivered", "failed"] | None = None,
    run_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    webhooks: WebhookService | None = runtime_of(request).webhooks
    if webhooks is None:
        raise HTTPException(status_code=503, detail="this Gateway was built without webhooks")
    return {
        "counts": await webhooks.outbox.counts(),
        "deliveries": await webhooks.outbox.listing(status, run_id, limit),
    }
