"""Threads: create, search, count, read, update metadata, delete, prune; state and history.

A thread's ``values`` (its current state) come from the checkpointer through the lead graph
(``agents.thread_state``); state responses have LangGraph's ``ThreadState`` shape. A
thread's ``ttl`` and ``prune`` go through the Gateway's expiry (``deerflow_ext.expiry``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from langgraph.errors import InvalidUpdateError

from ...persistence.models import ThreadStatus
from ...persistence.records import ThreadQuery, ThreadRecord, ThreadTTL
from ...runtime.wire import jsonable, searchable_values
from ..errors import TolerantJSONResponse, json_bytes
from ..schemas import (
    MAX_OFFSET,
    HistoryQuery,
    StateUpdate,
    ThreadCount,
    ThreadCreate,
    ThreadOut,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
    ThreadTTLIn,
    selected,
)
from ..scoping import authorized
from ..server_owned import strip_server_owned
from ..state import GatewayRuntime, runtime_of

__all__ = ["router"]

router = APIRouter(prefix="/api/threads", tags=["threads"])


def _states(runtime: GatewayRuntime) -> Any:
    return getattr(runtime.agent_host, "thread_states", None)


async def _snapshot(runtime: GatewayRuntime, thread_id: str) -> Any | None:
    states = _states(runtime)
    return await states.get(thread_id) if states is not None else None


def _interrupts(snapshot: Any) -> dict[str, list[Any]]:
    """LangGraph's ``Thread.interrupts``: each paused task's interrupts, by task id."""
    return {task.id: jsonable(task.interrupts) for task in snapshot.tasks if task.interrupts}


async def _thread_out(runtime: GatewayRuntime, record: ThreadRecord, select: list[str] | None = None) -> dict[str, Any]:
    snapshot = None
    if not select or "values" in select or "interrupts" in select:
        snapshot = await _snapshot(runtime, record.id)
    if snapshot is None:
        return selected(ThreadOut.of(record).model_dump(mode="json"), select)
    out = ThreadOut.of(record, jsonable(snapshot.values), _interrupts(snapshot))
    return selected(out.model_dump(mode="json"), select)


async def _threads_out(
    runtime: GatewayRuntime, records: list[ThreadRecord], select: list[str] | None = None
) -> list[dict[str, Any]]:
    """:func:`_thread_out` of each, the event loop getting a turn between threads: a page is
    up to 1,000 threads, each state read and converted (on SQLite, the checkpoint read where
    it is awaited when nothing else is queued: ``one_thread``)."""
    out = []
    for record in records:
        out.append(await _thread_out(runtime, record, select))
        await asyncio.sleep(0)
    return out


def _answer(content: dict[str, Any] | list[dict[str, Any]]) -> TolerantJSONResponse:
    """Threads as :func:`_thread_out` made them (JSON already), sent as they are.

    Returned plainly, FastAPI walks the content again with its ``jsonable_encoder``: 0.9% of
    a served trivial run's instructions for ``threads.create`` alone, and the walk
    drops every key that starts with ``_sa`` (its guard for SQLAlchemy objects), a client's
    metadata key included."""
    return TolerantJSONResponse(content)


async def _thread(
    runtime: GatewayRuntime, thread_id: str, request: Request | None = None, action: str = "read"
) -> ThreadRecord:
    """The thread, or 404; with ``request``, as its user's ``threads.<action>`` handler lets
    them see it (another user's thread is not found)."""
    filters = None
    if request is not None and request.scope.get("user") is not None:
        filters = await authorized(request, "threads", action, {"thread_id": thread_id})
    record = await runtime.store.get_thread(thread_id, filters)
    if record is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    return record


def _ttl(runtime: GatewayRuntime, value: ThreadTTLIn | float | None) -> ThreadTTL | None:
    """A client's ``ttl`` (a number is minutes under the configured strategy, as
    ``langgraph_sdk`` sends ``delete``'s)."""
    if value is None:
        return None
    if runtime.expiry is None:
        raise HTTPException(status_code=501, detail="ttl: this Gateway runs no thread expiry")
    if isinstance(value, ThreadTTLIn):
        return runtime.expiry.threads.ttl(value.ttl, value.strategy)  # type: ignore[no-any-return]
    return runtime.expiry.threads.ttl(value, "delete")  # type: ignore[no-any-return]


async def _with_ttl(runtime: GatewayRuntime, out: dict[str, Any], thread_id: str) -> dict[str, Any]:
    """``out`` with LangGraph's ``ttl`` of the thread (``strategy``, ``ttl_minutes``,
    ``expires_at``; null without one)."""
    if runtime.expiry is None:
        return {**out, "ttl": None}
    return {**out, "ttl": await runtime.expiry.threads.ttl_of(thread_id)}


@router.post("", response_model=None, responses={200: {"model": ThreadOut}})
async def create_thread(request: Request, body: Annotated[ThreadCreate | None, Body()] = None) -> Any:
    """Create a thread (``if_exists``: ``raise`` answers 409, ``do_nothing`` returns it);
    ``ttl`` (else ``checkpointer.ttl.default_ttl``) arms its expiry."""
    runtime = runtime_of(request)
    body = body or ThreadCreate()
    ttl = _ttl(runtime, body.ttl)
    metadata = {**body.metadata, **({"graph_id": body.graph_id} if body.graph_id else {})}
    filters = None
    if request.scope.get("user") is not None:  # the create handler may stamp the metadata
        value: dict[str, Any] = {"thread_id": body.thread_id, "metadata": metadata, "if_exists": body.if_exists}
        filters = await authorized(request, "threads", "create", value)
        metadata = dict(value.get("metadata") or {})
    if body.thread_id is not None:
        existing = await runtime.store.get_thread(body.thread_id)
        if existing is not None:
            if body.if_exists == "raise":
                raise HTTPException(status_code=409, detail=f"thread {body.thread_id} already exists")
            if filters and await runtime.store.get_thread(body.thread_id, filters) is None:
                raise HTTPException(status_code=409, detail=f"thread {body.thread_id} already exists")
            return _answer(await _thread_out(runtime, existing))
    record = await runtime.store.create_thread(metadata, thread_id=body.thread_id, ttl=ttl)
    out = ThreadOut.of(record).model_dump(mode="json")
    return _answer(out if ttl is None else await _with_ttl(runtime, out, record.id))


async def _query(request: Request, body: ThreadCount | ThreadSearch) -> ThreadQuery:
    filters, metadata = None, body.metadata
    if request.scope.get("user") is not None:
        value = body.model_dump(mode="json", exclude_none=True)
        filters = await authorized(request, "threads", "search", value)
        if isinstance(value.get("metadata"), dict):  # a handler may narrow the search itself
            metadata = value["metadata"]
    if isinstance(body, ThreadSearch):
        return ThreadQuery(
            metadata=metadata,
            values=body.values or {},
            status=body.status,
            ids=tuple(body.ids) if body.ids is not None else None,
            sort_by="updated_at" if body.sort_by == "state_updated_at" else body.sort_by,
            descending=body.sort_order == "desc",
            limit=body.limit,
            offset=body.offset,
            filters=filters,
        )
    return ThreadQuery(metadata=metadata, values=body.values or {}, status=body.status, filters=filters)


@router.post("/search", response_model=None, responses={200: {"model": list[ThreadOut]}})
async def search_threads(request: Request, body: Annotated[ThreadSearch | None, Body()] = None) -> Any:
    """Threads whose metadata has every key of ``metadata``, filtered by ``status``/``ids``,
    newest update first unless ``sort_by``/``sort_order`` say otherwise."""
    runtime = runtime_of(request)
    body = body or ThreadSearch()
    records = await runtime.store.search_threads(await _query(request, body))
    return _answer(await _threads_out(runtime, records, body.select))


@router.post("/count", response_model=int)
async def count_threads(request: Request, body: Annotated[ThreadCount | None, Body()] = None) -> int:
    return await runtime_of(request).store.count_threads(await _query(request, body or ThreadCount()))


@router.get("", response_model=None, responses={200: {"model": list[ThreadOut]}})
async def list_threads(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    runtime = runtime_of(request)
    if request.scope.get("user") is not None:
        query = await _query(request, ThreadSearch(limit=limit, offset=offset))
        return _answer(await _threads_out(runtime, await runtime.store.search_threads(query)))
    records = await runtime.store.list_threads(limit=limit, offset=offset)
    return _answer(await _threads_out(runtime, records))


@router.post("/prune")
async def prune_threads(request: Request, body: ThreadPrune) -> dict[str, int]:
    """LangGraph's ``threads.prune``: ``delete`` the threads (runs, checkpoints and crons
    with them) or keep each with its latest checkpoint only (``keep_latest``), through the
    same code as the TTL sweep. A thread that does not exist or has a run pending or
    running is left alone and not counted."""
    runtime = runtime_of(request)
    if runtime.expiry is None:
        raise HTTPException(status_code=501, detail="this Gateway runs no thread expiry; prune is not served")
    thread_ids = body.thread_ids
    if request.scope.get("user") is not None:  # only threads the user may delete are pruned
        visible = []
        for thread_id in thread_ids:
            filters = await authorized(request, "threads", "delete", {"thread_id": thread_id})
            if await runtime.store.get_thread(thread_id, filters) is not None:
                visible.append(thread_id)
        thread_ids = visible
    return {"pruned_count": await runtime.expiry.threads.prune(thread_ids, body.strategy)}


@router.get("/{thread_id}", response_model=None, responses={200: {"model": ThreadOut}})
async def get_thread(request: Request, thread_id: str, include: Annotated[list[str] | None, Query()] = None) -> Any:
    """The thread; ``include=ttl`` adds its ``ttl`` (LangGraph's only ``include``)."""
    runtime = runtime_of(request)
    fields = {name.strip() for value in include or () for name in value.split(",") if name.strip()}
    if fields - {"ttl"}:
        raise HTTPException(status_code=422, detail=f"include: unknown field(s) {sorted(fields - {'ttl'})}; only 'ttl'")
    out = await _thread_out(runtime, await _thread(runtime, thread_id, request))
    return _answer(await _with_ttl(runtime, out, thread_id) if fields else out)


@router.patch("/{thread_id}", response_model=None, responses={200: {"model": ThreadOut}})
async def update_thread(
    request: Request,
    thread_id: str,
    body: ThreadPatch,
    prefer: Annotated[str | None, Header()] = None,
) -> Any:
    """Merge ``metadata`` into the thread's; ``ttl`` re-arms its expiry from now
    (``Prefer: return=minimal`` answers 204)."""
    runtime = runtime_of(request)
    ttl = _ttl(runtime, body.ttl)
    patch, filters = body.metadata, None
    if request.scope.get("user") is not None:
        value: dict[str, Any] = {"thread_id": thread_id, "metadata": dict(body.metadata)}
        filters = await authorized(request, "threads", "update", value)
        patch = dict(value.get("metadata") or {})
    record = await runtime.store.update_thread_metadata(thread_id, patch, filters)
    if record is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    if ttl is not None:
        await runtime.expiry.threads.arm(thread_id, ttl)  # _ttl checked there is one
    if prefer is not None and "return=minimal" in prefer:
        return Response(status_code=204)
    out = await _thread_out(runtime, record)
    return _answer(out if ttl is None else await _with_ttl(runtime, out, thread_id))


@router.post("/{thread_id}/copy", response_model=None, responses={200: {"model": ThreadOut}})
async def copy_thread(request: Request, thread_id: str) -> Any:
    """A new thread with this one's metadata, state and checkpoints (history included), and
    its status: a copy of a paused thread is ``interrupted`` too (an inbox listing
    ``status=interrupted`` finds it). A copy of a ``busy`` thread has no run, so it is
    ``interrupted`` if the copied checkpoint has work pending, else ``idle``."""
    runtime = runtime_of(request)
    source = await _thread(runtime, thread_id, request)
    metadata = dict(source.metadata)
    if request.scope.get("user") is not None:  # the copy is the user's new thread
        value: dict[str, Any] = {"thread_id": None, "metadata": metadata, "if_exists": "raise"}
        await authorized(request, "threads", "create", value)
        metadata = dict(value.get("metadata") or {})
    status = ThreadStatus(source.status)
    if status is ThreadStatus.BUSY:
        snapshot = await _snapshot(runtime, thread_id)
        status = ThreadStatus.INTERRUPTED if snapshot is not None and snapshot.next else ThreadStatus.IDLE
    record = await runtime.store.create_thread(metadata, status=status)
    states = _states(runtime)
    if states is not None:
        await states.copy(thread_id, record.id)
        await _refresh_searchable(runtime, record.id)
    return _answer(await _thread_out(runtime, record))


@router.delete("/{thread_id}", status_code=204)
async def delete_thread(request: Request, thread_id: str) -> Response:
    """Delete the thread, its runs and its checkpoints (not while a run is in progress)."""
    runtime = runtime_of(request)
    filters = None
    if request.scope.get("user") is not None:
        filters = await authorized(request, "threads", "delete", {"thread_id": thread_id})
    deleted = await runtime.store.delete_thread(thread_id, filters)
    if deleted is None:  # a run pending or running in any Gateway process
        raise HTTPException(status_code=409, detail=f"thread {thread_id} has a run in progress; cancel it first")
    if not deleted:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    states = _states(runtime)
    if states is not None:
        await states.delete(thread_id)
    return Response(status_code=204)


# ---------------------------------------------------------------------------- state


def _checkpoint(configurable: dict[str, Any] | None, thread_id: str) -> dict[str, Any] | None:
    if not configurable or not configurable.get("checkpoint_id"):
        return None
    return {
        "thread_id": thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable["checkpoint_id"],
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


def _state_out(snapshot: Any, thread_id: str) -> dict[str, Any]:
    """LangGraph's ``ThreadState`` from a ``StateSnapshot``."""
    interrupts = [jsonable(i) for i in getattr(snapshot, "interrupts", ()) or ()]
    return {
        "values": jsonable(snapshot.values),
        "next": list(snapshot.next),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "error": None if task.error is None else repr(task.error),
                "interrupts": [jsonable(i) for i in task.interrupts],
                "checkpoint": None,
                "state": None,
                "result": jsonable(getattr(task, "result", None)),
            }
            for task in snapshot.tasks
        ],
        "checkpoint": _checkpoint((snapshot.config or {}).get("configurable"), thread_id),
        "metadata": jsonable(snapshot.metadata),
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint((snapshot.parent_config or {}).get("configurable"), thread_id),
        "interrupts": interrupts,
    }


_EMPTY_STATE: dict[str, Any] = {
    "values": {},
    "next": [],
    "tasks": [],
    "checkpoint": None,
    "metadata": {},
    "created_at": None,
    "parent_checkpoint": None,
    "interrupts": [],
}


async def _state(
    runtime: GatewayRuntime, thread_id: str, checkpoint_id: str | None = None, request: Request | None = None
) -> dict[str, Any]:
    await _thread(runtime, thread_id, request)
    states = _states(runtime)
    snapshot = await states.get(thread_id, checkpoint_id) if states is not None else None
    if snapshot is None:
        if checkpoint_id is not None:
            raise HTTPException(status_code=404, detail=f"checkpoint {checkpoint_id} not found on thread {thread_id}")
        return {**_EMPTY_STATE, "checkpoint": None}
    return _state_out(snapshot, thread_id)


@router.get("/{thread_id}/state")
async def get_state(
    request: Request, thread_id: str, select: Annotated[list[str] | None, Query()] = None
) -> dict[str, Any]:
    """The thread's latest state (``subgraphs`` is accepted; the lead graph has none)."""
    return selected(await _state(runtime_of(request), thread_id, None, request), select)


@router.get("/{thread_id}/state/{checkpoint_id}")
async def get_state_at(request: Request, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    return await _state(runtime_of(request), thread_id, checkpoint_id, request)


@router.post("/{thread_id}/state/checkpoint")
async def get_state_at_checkpoint(request: Request, thread_id: str, body: HistoryQuery) -> dict[str, Any]:
    checkpoint_id = body.checkpoint.checkpoint_id if body.checkpoint is not None else None
    return selected(await _state(runtime_of(request), thread_id, checkpoint_id, request), body.select)


@router.post("/{thread_id}/state")
async def update_state(request: Request, thread_id: str, body: StateUpdate) -> dict[str, Any]:
    """Write ``values`` into the thread's state as node ``as_node`` would (not during a run)."""
    runtime = runtime_of(request)
    await _thread(runtime, thread_id, request, "update")
    if runtime.runs.active_on(thread_id) or await runtime.store.has_live_run(thread_id):
        raise HTTPException(status_code=409, detail=f"thread {thread_id} has a run in progress")
    states = _states(runtime)
    if states is None:
        raise HTTPException(status_code=501, detail="this Gateway's agent host keeps no thread state")
    checkpoint_id = body.checkpoint.checkpoint_id if body.checkpoint is not None else body.checkpoint_id
    try:
        # Provenance keys are the host's: a client cannot stamp a message as the host's own.
        values = strip_server_owned(body.values)
        configurable = await states.update(thread_id, values, as_node=body.as_node, checkpoint_id=checkpoint_id)
    except (ValueError, LookupError, InvalidUpdateError) as exc:  # a node or values the graph refuses
        raise HTTPException(status_code=422, detail=f"cannot update the state of thread {thread_id}: {exc}") from exc
    await _refresh_searchable(runtime, thread_id)
    return {"checkpoint": _checkpoint(configurable, thread_id)}


async def _refresh_searchable(runtime: GatewayRuntime, thread_id: str) -> None:
    """The thread's ``state_values`` from its state now (a values filter reads them)."""
    snapshot = await _snapshot(runtime, thread_id)
    if snapshot is not None:
        await runtime.store.set_thread_state_values(thread_id, searchable_values(snapshot.values))


async def _history(
    runtime: GatewayRuntime, thread_id: str, query: HistoryQuery, request: Request | None = None
) -> Response:
    """The states as one JSON array, each rendered on its own with a turn of the event loop
    between them: a history is as long as a client asks (1,000 states of a long thread took
    the loop for seconds, built into dicts, walked by FastAPI's encoder and then rendered).
    The checkpoints themselves are read off the loop (``threaded_saver``). Rendered whole
    before the first byte goes (a state that cannot be rendered is a 500, not a cut answer),
    then sent part by part, never joined."""
    await _thread(runtime, thread_id, request)
    states = _states(runtime)
    if states is None:
        return Response(b"[]", media_type="application/json")
    snapshots = await states.history(
        thread_id,
        limit=query.limit,
        before=query.before_id,
        metadata=query.metadata,
        checkpoint_ns=query.checkpoint.checkpoint_ns if query.checkpoint is not None else "",
    )
    parts = [b"["]
    for index, snapshot in enumerate(snapshots):
        parts.append(json_bytes(selected(_state_out(snapshot, thread_id), query.select)))
        parts.append(b"]" if index == len(snapshots) - 1 else b",")
        await asyncio.sleep(0)
    if not snapshots:
        parts.append(b"]")
    del snapshots
    return StreamingResponse(_sent(parts), media_type="application/json")


async def _sent(parts: list[bytes]) -> AsyncIterator[bytes]:
    """``parts`` in order, each let go once sent: the answer is never joined into one copy."""
    parts.reverse()
    while parts:
        yield parts.pop()


_HISTORY: dict[int | str, dict[str, Any]] = {200: {"model": list[dict[str, Any]]}}


@router.post("/{thread_id}/history", response_model=None, responses=_HISTORY)
async def history(request: Request, thread_id: str, body: Annotated[HistoryQuery | None, Body()] = None) -> Response:
    """The thread's states, newest first (``limit``, ``before`` a checkpoint, ``metadata``)."""
    return await _history(runtime_of(request), thread_id, body or HistoryQuery(), request)


@router.get("/{thread_id}/history", response_model=None, responses=_HISTORY)
async def history_get(
    request: Request,
    thread_id: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    before: str | None = None,
) -> Response:
    return await _history(runtime_of(request), thread_id, HistoryQuery(limit=limit, before=before), request)
