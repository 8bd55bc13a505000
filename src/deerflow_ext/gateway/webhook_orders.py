"""A run's ``webhook`` as the run routes take it: checked by the Gateway's URL policy before the
run is created (a refusal is a 422 naming the reason, and no run starts), then handed to the
run as a ``webhooks.WebhookOrder`` its end turns into the outbox row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fastapi import HTTPException

from ..persistence.records.recovery import ORPHANED_WHY, OwedOnRecovery
from ..webhooks import WebhookOrder, WebhookService, WebhookUrlError
from .schemas import ASSISTANT_ID, request_kwargs
from .state import GatewayRuntime

__all__ = ["check_webhook", "owed_on_recovery", "webhook_order"]


async def check_webhook(runtime: GatewayRuntime, url: str) -> None:
    """422 unless the Gateway would deliver to ``url`` (its policy, its name resolved)."""
    if runtime.webhooks is None:
        raise HTTPException(status_code=422, detail="webhook: this Gateway was built without webhooks")
    try:
        await runtime.webhooks.accept(url)
    except WebhookUrlError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


def _order(service: WebhookService, url: str, stored: Mapping[str, Any]) -> WebhookOrder:
    return service.order(
        url,
        assistant_id=str(stored.get("assistant_id") or ASSISTANT_ID),
        metadata=dict(stored.get("metadata") or {}),
        kwargs=request_kwargs(dict(stored)),
        strategy=str(stored.get("multitask_strategy") or "interrupt"),
    )


async def webhook_order(runtime: GatewayRuntime, url: str, stored: dict[str, Any]) -> WebhookOrder:
    """The checked order a run with ``webhook`` carries; ``stored``: its request as recorded."""
    await check_webhook(runtime, url)
    return _order(runtime.webhooks, url, stored)


def owed_on_recovery(service: WebhookService) -> OwedOnRecovery:
    """What startup recovery writes for a run a dead process left live that had a ``webhook``
    (its stored request names it): the delivery its end would have written, ``interrupted``
    with the recovery's reason, in the transaction that ends it. A Gateway with webhooks
    switched off owes none."""

    def owed(
        run_id: str, thread_id: str, stored: Mapping[str, Any], created: datetime | None, started: datetime | None
    ) -> Mapping[str, Any] | None:
        url = stored.get("webhook")
        if not isinstance(url, str) or service.disabled:
            return None
        return _order(service, url, stored).outbox_row(
            run_id=run_id,
            thread_id=thread_id,
            status="interrupted",
            created_at=created,
            started_at=started,
            error=ORPHANED_WHY,
            values=None,
        )

    return owed
