"""A run's ``webhook`` as the run routes take it: checked by the Gateway's URL policy before the
run is created (a refusal is a 422 naming the reason, and no run starts), then handed to the
run as a ``webhooks.WebhookOrder`` its end turns into the outbox row."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from ..webhooks import WebhookOrder, WebhookUrlError
from .schemas import ASSISTANT_ID, request_kwargs
from .state import GatewayRuntime

__all__ = ["check_webhook", "webhook_order"]


async def check_webhook(runtime: GatewayRuntime, url: str) -> None:
    """422 unless the Gateway would deliver to ``url`` (its policy, its name resolved)."""
    if runtime.webhooks is None:
        raise HTTPException(status_code=422, detail="webhook: this Gateway was built without webhooks")
    try:
        await runtime.webhooks.accept(url)
    except WebhookUrlError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


async def webhook_order(runtime: GatewayRuntime, url: str, stored: dict[str, Any]) -> WebhookOrder:
    """The checked order a run with ``webhook`` carries; ``stored``: its request as recorded."""
    await check_webhook(runtime, url)
    order: WebhookOrder = runtime.webhooks.order(
        url,
        assistant_id=str(stored.get("assistant_id") or ASSISTANT_ID),
        metadata=dict(stored.get("metadata") or {}),
        kwargs=request_kwargs(stored),
        strategy=str(stored.get("multitask_strategy") or "interrupt"),
    )
    return order
