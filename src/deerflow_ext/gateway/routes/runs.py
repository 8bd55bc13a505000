"""Runs on a thread: stream, start in the background, list, read, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import StreamingResponse

from ...runtime.handle import RunHandle
from ...runtime.manager import RunsClosedError
from ..schemas import RunCreate, RunOut
from ..sse import sse_response
from ..state import GatewayRuntime, runtime_of

__all__ = ["router"]

router = APIRouter(prefix="/api/threads/{thread_id}/runs", tags=["runs"])


async def _start(runtime: GatewayRuntime, thread_id: str, body: RunCreate) -> RunHandle:
    if await runtime.store.get_thread(thread_id) is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    try:
        return await runtime.runs.start(
            thread_id,
            messages=[m.model_dump() for m in body.input.messages],
            goal=body.goal,
            context=body.context,
            run_input=body.model_dump(),
        )
    except RunsClosedError as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from exc


async def _run_out(runtime: GatewayRuntime, thread_id: str, run_id: str) -> RunOut:
    record = await runtime.store.get_run(thread_id, run_id)
    if record is None:
        raise HTTPException(status_code=404, detail=f"run {run_id} not found on thread {thread_id}")
    return RunOut.of(record)


@router.post("/stream")
async def stream_run(request: Request, thread_id: str, body: RunCreate) -> StreamingResponse:
    handle = await _start(runtime_of(request), thread_id, body)
    return sse_response(handle.stream, headers={"Content-Location": f"/api/threads/{thread_id}/runs/{handle.run_id}"})


@router.post("", response_model=RunOut)
async def create_run(request: Request, thread_id: str, body: RunCreate) -> RunOut:
    runtime = runtime_of(request)
    handle = await _start(runtime, thread_id, body)
    return await _run_out(runtime, thread_id, handle.run_id)


@router.get("", response_model=list[RunOut])
async def list_runs(
    request: Request,
    thread_id: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[RunOut]:
    runtime = runtime_of(request)
    if await runtime.store.get_thread(thread_id) is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    return [RunOut.of(r) for r in await runtime.store.list_runs(thread_id, limit=limit, offset=offset)]


@router.get("/{run_id}", response_model=RunOut)
async def get_run(request: Request, thread_id: str, run_id: str) -> RunOut:
    return await _run_out(runtime_of(request), thread_id, run_id)


@router.post("/{run_id}/cancel", response_model=RunOut, status_code=202)
async def cancel_run(request: Request, thread_id: str, run_id: str) -> RunOut:
    """Ask the run to stop; it persists as ``interrupted`` once its ``on_task_stop`` returned.

    A run that already finished is returned unchanged (cancel is idempotent), so a client
    racing the run's end does not get an error for a stop that no longer matters. Any
    Gateway process can receive it: a run owned by another process is cancelled there.
    """
    runtime = runtime_of(request)
    out = await _run_out(runtime, thread_id, run_id)
    # The run may execute in another Gateway process: the manager signals its owner.
    await runtime.runs.request_cancel(run_id, out.status)
    return out
