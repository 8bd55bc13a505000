"""Threads: create, list, read, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Query, Request, Response

from ..schemas import ThreadCreate, ThreadCreated, ThreadOut
from ..state import runtime_of

__all__ = ["router"]

router = APIRouter(prefix="/api/threads", tags=["threads"])


@router.post("", response_model=ThreadCreated)
async def create_thread(
    request: Request, body: Annotated[ThreadCreate | None, Body()] = None
) -> ThreadCreated:
    record = await runtime_of(request).store.create_thread((body or ThreadCreate()).metadata)
    return ThreadCreated(thread_id=record.id)


@router.get("", response_model=list[ThreadOut])
async def list_threads(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[ThreadOut]:
    return [ThreadOut.of(t) for t in await runtime_of(request).store.list_threads(limit=limit, offset=offset)]


@router.get("/{thread_id}", response_model=ThreadOut)
async def get_thread(request: Request, thread_id: str) -> ThreadOut:
    record = await runtime_of(request).store.get_thread(thread_id)
    if record is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    return ThreadOut.of(record)


@router.delete("/{thread_id}", status_code=204)
async def delete_thread(request: Request, thread_id: str) -> Response:
    runtime = runtime_of(request)
    if runtime.runs.active_on(thread_id):
        raise HTTPException(
            status_code=409, detail=f"thread {thread_id} has a run in progress; cancel it first"
        )
    if not await runtime.store.delete_thread(thread_id):
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    return Response(status_code=204)
