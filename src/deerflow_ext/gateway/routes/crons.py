"""Crons: every LangGraph Platform cron route answers 501, saying why.

A cron done properly needs a scheduler that survives a restart and fires once per schedule
across ``--workers N`` processes (a thread's ``POST .../runs/crons`` is the runs router's, next
to the thread's other run routes); the Gateway has neither yet, and a cron that silently never
fires (or fires twice) is worse than a clear refusal. A client that creates one learns it at
once, from one line, instead of finding out when the schedule passes. The routes stay out of
the OpenAPI document: it lists what is served (README's feature table lists what is not).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

__all__ = ["CRONS_UNSUPPORTED", "router"]

router = APIRouter(tags=["crons"])

CRONS_UNSUPPORTED = (
    "crons are not supported by this Gateway (no scheduler that survives restarts and fires once across "
    "workers); schedule runs from outside, e.g. with cron and langgraph_sdk's runs.create"
)
_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE"]


@router.api_route("/api/runs/crons", methods=_METHODS, status_code=501, include_in_schema=False)
@router.api_route("/api/runs/crons/{rest:path}", methods=_METHODS, status_code=501, include_in_schema=False)
async def crons() -> None:
    """Not served: answers 501 (see the module's docstring)."""
    raise HTTPException(status_code=501, detail=CRONS_UNSUPPORTED)
