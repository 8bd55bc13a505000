"""The operator's live views: ``GET /api/extensions`` and ``GET /metrics``.

Both need the API token when one is set, like every route but liveness
(``gateway/access.py`` guards them all). ``/api/extensions`` describes every
``plugins:`` entry as the running Gateway loaded it (``extensions/operator_view/inventory.py``), with its
most recent diagnostics; ``/metrics`` is the Prometheus exposition of ``runtime/prometheus_metrics.py``
(404 when ``DEERFLOW_METRICS=0`` switched the counting off).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response

from ...extensions.operator_view.hook_metrics import metrics_enabled
from ...extensions.operator_view.inventory import describe_entries
from ...extensions.plugin_loading.discovery import EntryPointIndex
from ...runtime import prometheus_metrics as run_metrics
from ...webhooks import WebhookCollector
from ..scoping import admin_only

__all__ = ["entry_reports", "router"]

router = APIRouter(tags=["operator"])

run_metrics.REGISTRY.register(WebhookCollector())  # the webhook counters, read at scrape time


def entry_reports(request: Request) -> list[Any]:
    """The running Gateway's view of its ``plugins:`` entries (also used by ``/health``)."""
    state = request.app.state
    if state.entry_points is None:
        state.entry_points = EntryPointIndex.scan()
    return describe_entries(
        state.config.plugins,
        state.entry_points,
        extensions=state.extensions,
        diagnostics=state.extension_diagnostics.snapshot(),
    )


@router.get("/api/extensions")
async def list_extensions(request: Request) -> dict[str, Any]:
    admin_only(request)
    extensions = request.app.state.extensions
    return {
        "summary": extensions.summary,
        "loaded": len(extensions.loaded),
        "total": extensions.total,
        "extensions": [report.as_dict() for report in entry_reports(request)],
    }


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    admin_only(request)
    if not metrics_enabled():
        raise HTTPException(status_code=404, detail="metrics are switched off (DEERFLOW_METRICS=0)")
    return Response(content=run_metrics.render(), media_type=run_metrics.CONTENT_TYPE)
