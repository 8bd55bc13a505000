"""Assistants: the one built-in assistant, the lead agent (id and graph id ``lead_agent``).

LangGraph clients address a graph through an assistant; the Gateway serves one graph, so
it has one assistant, which cannot be created, changed or deleted over HTTP. Its schemas
and drawing come from the lead graph (``agents.thread_state`` builds it once per process).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from ..schemas import ASSISTANT_ID, GRAPH_ID, MAX_OFFSET, selected
from ..state import runtime_of

__all__ = ["AssistantOut", "AssistantSearch", "router"]

router = APIRouter(prefix="/api/assistants", tags=["assistants"])
logger = logging.getLogger("deerflow_ext.gateway")

_CREATED = datetime(2025, 1, 1, tzinfo=UTC)


class AssistantOut(BaseModel):
    assistant_id: str = ASSISTANT_ID
    graph_id: str = GRAPH_ID
    name: str = ASSISTANT_ID
    description: str | None = "DeerFlow's lead agent: answers, uses tools, delegates to subagents (task tool)."
    config: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=lambda: {"created_by": "system"})
    version: int = 1
    created_at: datetime = _CREATED
    updated_at: datetime = _CREATED


class AssistantSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(default_factory=dict)
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


_LEAD = AssistantOut()


def _matches(query: AssistantSearch) -> bool:
    return (
        query.offset == 0
        and query.graph_id in (None, GRAPH_ID)
        and query.name in (None, _LEAD.name)
        and all(_LEAD.metadata.get(k) == v for k, v in query.metadata.items())
    )


@router.post("/search", response_model=None, responses={200: {"model": list[AssistantOut]}})
async def search_assistants(body: Annotated[AssistantSearch | None, Body()] = None) -> Any:
    query = body or AssistantSearch()
    return [selected(_LEAD.model_dump(mode="json"), query.select)] if _matches(query) else []


@router.post("/count", response_model=int)
async def count_assistants(body: Annotated[AssistantSearch | None, Body()] = None) -> int:
    return 1 if _matches(body or AssistantSearch()) else 0


def _known(assistant_id: str) -> None:
    if assistant_id not in (ASSISTANT_ID, GRAPH_ID):
        raise HTTPException(status_code=404, detail=f"assistant {assistant_id} not found; use '{ASSISTANT_ID}'")


@router.get("/{assistant_id}", response_model=AssistantOut)
async def get_assistant(assistant_id: str) -> AssistantOut:
    _known(assistant_id)
    return _LEAD


async def _graph(request: Request) -> Any:
    states = getattr(runtime_of(request).agent_host, "thread_states", None)
    if states is None:
        raise HTTPException(status_code=501, detail="this Gateway's agent host has no graph to describe")
    return await states.graph()


def _schema(graph: Any, method: str) -> dict[str, Any] | None:
    """One JSON schema of the graph, or None where pydantic cannot express a type (as
    LangGraph Platform answers for such graphs)."""
    try:
        schema: dict[str, Any] = getattr(graph, method)()
    except Exception as exc:
        logger.debug("lead graph %s unavailable: %s", method, exc)
        return None
    return schema


@router.get("/{assistant_id}/schemas")
async def get_assistant_schemas(request: Request, assistant_id: str) -> dict[str, Any]:
    _known(assistant_id)
    graph = await _graph(request)
    return {
        "graph_id": GRAPH_ID,
        "input_schema": _schema(graph, "get_input_jsonschema"),
        "output_schema": _schema(graph, "get_output_jsonschema"),
        "state_schema": _schema(graph, "get_output_jsonschema"),
        "config_schema": None,  # LangGraph 1.x: configuration is the context schema
        "context_schema": _schema(graph, "get_context_jsonschema"),
    }


@router.get("/{assistant_id}/graph")
async def get_assistant_graph(request: Request, assistant_id: str, xray: bool | int = False) -> dict[str, Any]:
    _known(assistant_id)
    graph = await _graph(request)
    drawing: dict[str, Any] = (await graph.aget_graph(xray=xray)).to_json()
    return drawing


@router.get("/{assistant_id}/subgraphs")
async def get_assistant_subgraphs(assistant_id: str) -> dict[str, Any]:
    _known(assistant_id)
    return {}


@router.post("/{assistant_id}/versions", response_model=list[AssistantOut])
async def get_assistant_versions(assistant_id: str) -> list[AssistantOut]:
    _known(assistant_id)
    return [_LEAD]
