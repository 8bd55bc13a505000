"""Assistants: named, versioned configurations of the one graph (``lead_agent``).

LangGraph clients address a graph through an assistant. Every assistant here runs the lead
graph; its ``config`` and ``context`` are laid under each of its runs' own
(``gateway.assistants``). Create, read, update (a new version each time), delete, search,
count, list versions and switch the active one (``latest``) are LangGraph Platform's routes;
schemas, drawing and subgraphs answer for every assistant from the lead graph
(``agents.thread_state`` builds it once per process).

The built-in assistant ``lead_agent`` is a row the migration wrote (so search and count
list it like any other) that cannot be updated, switched or deleted: 409, one line. Keeping
it fixed is what lets a run addressed to it, the common case, skip the database; an
assistant of one's own is one ``create`` away and may be changed at will.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request, Response
from fastapi.encoders import jsonable_encoder

from ...persistence.assistant_tables import AssistantRecord
from ...persistence.assistants import (
    AssistantChange,
    AssistantDraft,
    AssistantExistsError,
    AssistantNotFoundError,
    AssistantQuery,
    BuiltInAssistantError,
    VersionNotFoundError,
)
from ...persistence.records import ThreadQuery
from ..assistant_schemas import (
    AssistantCount,
    AssistantCreate,
    AssistantOut,
    AssistantPatch,
    AssistantSearch,
    LatestVersion,
    VersionsQuery,
)
from ..assistants import assistants_of, resolve_assistant
from ..schemas import GRAPH_ID
from ..scoping import authorized
from ..state import GatewayRuntime, runtime_of

__all__ = ["router"]

router = APIRouter(prefix="/api/assistants", tags=["assistants"])
logger = logging.getLogger("deerflow_ext.gateway")

_UNTITLED = "Untitled"  # LangGraph's name for an assistant created without one


def _refused(exc: Exception) -> HTTPException:
    if isinstance(exc, AssistantNotFoundError | VersionNotFoundError):
        return HTTPException(status_code=404, detail=str(exc))
    return HTTPException(status_code=409, detail=str(exc))  # exists, or built in


async def _filters(request: Request, action: str, value: dict[str, Any]) -> Any:
    """The user's ``assistants.<action>`` filter (``auth``); None without ``auth``."""
    if request.scope.get("user") is None:
        return None
    return await authorized(request, "assistants", action, value)


async def _record(runtime: GatewayRuntime, assistant_id: str, filters: Any = None) -> AssistantRecord:
    record = await assistants_of(runtime).get(assistant_id, filters)
    if record is None:
        raise HTTPException(status_code=404, detail=f"assistant {assistant_id} not found")
    return record


# ---------------------------------------------------------------------------- collection


@router.post("", response_model=AssistantOut)
async def create_assistant(request: Request, body: AssistantCreate) -> AssistantOut:
    """A new assistant of the lead graph (``if_exists``: raise, 409, or do_nothing)."""
    metadata = body.metadata or {}
    if request.scope.get("user") is not None:  # the create handler may stamp the metadata
        value = body.model_dump(mode="json", exclude_none=True)
        value["metadata"] = dict(metadata)
        await authorized(request, "assistants", "create", value)
        metadata = dict(value.get("metadata") or {})
    draft = AssistantDraft(
        graph_id=body.graph_id,
        name=body.name or _UNTITLED,
        description=body.description,
        config=body.config_dict() or {},
        context=body.context or {},
        metadata=metadata,
        assistant_id=body.assistant_id,
    )
    try:
        record = await assistants_of(runtime_of(request)).create(draft, if_exists=body.if_exists)
    except AssistantExistsError as exc:
        raise _refused(exc) from None
    return AssistantOut.of(record)


async def _query(request: Request, body: AssistantCount | None) -> AssistantQuery:
    filters = None
    if request.scope.get("user") is not None:
        value = body.model_dump(mode="json", exclude_none=True) if body is not None else {}
        filters = await authorized(request, "assistants", "search", value)
    if body is None:
        return AssistantQuery(filters=filters)
    if not isinstance(body, AssistantSearch):
        return AssistantQuery(metadata=body.metadata, graph_id=body.graph_id, name=body.name, filters=filters)
    return AssistantQuery(
        metadata=body.metadata,
        graph_id=body.graph_id,
        name=body.name,
        limit=body.limit,
        offset=body.offset,
        sort_by=body.sort_by or "created_at",
        sort_order=body.sort_order or "desc",
        select=tuple(body.select or ()),
        filters=filters,
    )


def _document(row: dict[str, Any]) -> dict[str, Any]:
    # SQLite hands timestamps back without their zone; every stored time is UTC.
    document: dict[str, Any] = jsonable_encoder(
        {k: v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v for k, v in row.items()}
    )
    return document


@router.post("/search", response_model=None, responses={200: {"model": list[AssistantOut]}})
async def search_assistants(
    request: Request, response: Response, body: Annotated[AssistantSearch | None, Body()] = None
) -> Any:
    """Assistants matching every filter, newest first unless ``sort_by``/``sort_order`` say
    otherwise; ``X-Pagination-Next`` holds the next page's offset while there is one."""
    query = await _query(request, body)
    rows, more = await assistants_of(runtime_of(request)).search(query)
    if more:
        response.headers["X-Pagination-Next"] = str(query.offset + query.limit)
    return [_document(row) for row in rows]


@router.post("/count", response_model=int)
async def count_assistants(request: Request, body: Annotated[AssistantCount | None, Body()] = None) -> int:
    return await assistants_of(runtime_of(request)).count(await _query(request, body))


# ---------------------------------------------------------------------------- one assistant


@router.get("/{assistant_id}", response_model=AssistantOut)
async def get_assistant(request: Request, assistant_id: str) -> AssistantOut:
    filters = await _filters(request, "read", {"assistant_id": assistant_id})
    return AssistantOut.of(await _record(runtime_of(request), assistant_id, filters))


@router.patch("/{assistant_id}", response_model=AssistantOut)
async def update_assistant(request: Request, assistant_id: str, body: AssistantPatch) -> AssistantOut:
    """A new version of the assistant, made active: fields left out are kept, ``metadata``
    is merged into the active version's."""
    change = AssistantChange(
        graph_id=body.graph_id,
        name=body.name,
        description=body.description,
        config=body.config_dict(),
        context=body.context,
        metadata=body.metadata,
    )
    filters = None
    if request.scope.get("user") is not None:
        value = {**body.model_dump(mode="json", exclude_none=True), "assistant_id": assistant_id}
        value["metadata"] = dict(body.metadata or {})
        filters = await authorized(request, "assistants", "update", value)
        change = dataclasses.replace(change, metadata=dict(value.get("metadata") or {}) or None)
    try:
        return AssistantOut.of(await assistants_of(runtime_of(request)).update(assistant_id, change, filters))
    except (AssistantNotFoundError, BuiltInAssistantError) as exc:
        raise _refused(exc) from None


@router.delete("/{assistant_id}", status_code=204)
async def delete_assistant(request: Request, assistant_id: str, delete_threads: bool = False) -> Response:
    """Delete the assistant and its versions; ``delete_threads`` first deletes the threads
    whose metadata names it (``assistant_id``), with their runs and checkpoints."""
    runtime = runtime_of(request)
    store = assistants_of(runtime)
    filters = await _filters(request, "delete", {"assistant_id": assistant_id})
    try:
        if delete_threads:
            await _record(runtime, assistant_id, filters)
            if assistant_id == GRAPH_ID:
                raise BuiltInAssistantError("deleted")
            await _delete_threads(runtime, assistant_id, await _thread_filters(request))
        await store.delete(assistant_id, filters)
    except (AssistantNotFoundError, BuiltInAssistantError) as exc:
        raise _refused(exc) from None
    return Response(status_code=204)


async def _thread_filters(request: Request) -> Any:
    """The user's ``threads.delete`` filter: deleting an assistant's threads deletes only
    the threads the user could delete one by one."""
    if request.scope.get("user") is None:
        return None
    return await authorized(request, "threads", "delete", {"thread_id": None})


async def _delete_threads(runtime: GatewayRuntime, assistant_id: str, filters: Any = None) -> None:
    states = getattr(runtime.agent_host, "thread_states", None)
    query = ThreadQuery(metadata={"assistant_id": assistant_id}, filters=filters)
    while threads := await runtime.store.search_threads(query):
        for thread in threads:
            deleted = await runtime.store.delete_thread(thread.id, filters)
            if deleted is None:  # a run pending or running: the assistant stays too
                raise HTTPException(
                    status_code=409, detail=f"thread {thread.id} has a run in progress; cancel it first"
                )
            if states is not None:
                await states.delete(thread.id)


@router.post("/{assistant_id}/versions", response_model=list[AssistantOut])
async def get_assistant_versions(
    request: Request, assistant_id: str, body: Annotated[VersionsQuery | None, Body()] = None
) -> list[AssistantOut]:
    """The assistant's versions, newest first (``metadata`` filters, ``limit``/``offset`` page)."""
    query = body or VersionsQuery()
    store = assistants_of(runtime_of(request))
    filters = await _filters(request, "read", {"assistant_id": assistant_id})
    try:
        found = await store.versions(
            assistant_id, metadata=query.metadata, limit=query.limit, offset=query.offset, filters=filters
        )
    except AssistantNotFoundError as exc:
        raise _refused(exc) from None
    return [AssistantOut.of(record) for record in found]


@router.post("/{assistant_id}/latest", response_model=AssistantOut)
async def set_latest_version(request: Request, assistant_id: str, body: LatestVersion) -> AssistantOut:
    """Make one of the assistant's versions the active one."""
    filters = await _filters(request, "update", {"assistant_id": assistant_id, "version": body.version})
    try:
        return AssistantOut.of(await assistants_of(runtime_of(request)).set_latest(assistant_id, body.version, filters))
    except (AssistantNotFoundError, VersionNotFoundError, BuiltInAssistantError) as exc:
        raise _refused(exc) from None


# ---------------------------------------------------------------------------- the graph


async def _graph(request: Request, assistant_id: str) -> Any:
    runtime = runtime_of(request)
    filters = await _filters(request, "read", {"assistant_id": assistant_id})
    if filters:  # another user's assistant is not found
        await _record(runtime, assistant_id, filters)
    await resolve_assistant(runtime, assistant_id)  # 404 for no such assistant
    states = getattr(runtime.agent_host, "thread_states", None)
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
    graph = await _graph(request, assistant_id)
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
    graph = await _graph(request, assistant_id)
    drawing: dict[str, Any] = (await graph.aget_graph(xray=xray)).to_json()
    return drawing


@router.get("/{assistant_id}/subgraphs")
@router.get("/{assistant_id}/subgraphs/{namespace}")
async def get_assistant_subgraphs(
    request: Request, assistant_id: str, namespace: str | None = None, recurse: bool = False
) -> dict[str, Any]:
    """The lead graph has no subgraph nodes (subagents run as a tool), so none."""
    await resolve_assistant(runtime_of(request), assistant_id)
    return {}
