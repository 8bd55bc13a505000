"""Stateless runs: ``POST /api/runs/stream``, ``/api/runs/wait`` and ``/api/runs``.

LangGraph Platform runs a graph without a thread the client made: the server makes one for
the run and, once the run ended, deletes it (``on_completion: delete``, the default) or
keeps it (``keep``: the client can read it from the run's ``thread_id``). Here the thread is
an ordinary one, so the run goes through the same admission, hooks, persistence and stream
as any other; only its end differs.

The thread is deleted after the run ended *and* its answer went out: the ``/wait`` answer of
a failed run is read from the run's row, which goes with the thread.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from ...runtime.handle import RunHandle
from ...runtime.stream_modes import DEFAULT_STREAM_MODES, WAIT_STREAM_MODES
from ..schemas import ASSISTANT_ID, GRAPH_ID, RunCreate, RunOut
from ..sse import run_events, sse_response
from ..state import GatewayRuntime, runtime_of
from ..streaming import ListeningStreamingResponse
from .runs import _JSON_DOC, SSE_DOC, _await_then_values, _paths, _run_out, following, start_run

__all__ = ["forget_after", "router", "start_stateless"]

router = APIRouter(prefix="/api/runs", tags=["runs"])
logger = logging.getLogger("deerflow_ext.gateway")

_FORGETTING: set[asyncio.Task[None]] = set()
"""Deletions waiting for their run's end (held so the loop does not drop them)."""


async def start_stateless(
    runtime: GatewayRuntime, body: RunCreate, default_modes: tuple[str, ...] = DEFAULT_STREAM_MODES
) -> tuple[str, RunHandle]:
    """The run on a new thread; a run refused (bad assistant, shutting down) takes it along.

    The routes below and the agent protocols (``protocols/``: an MCP tool call, an A2A
    message) start a stateless run through this one function."""
    thread_id = str(uuid.uuid4())
    await runtime.store.create_thread({"graph_id": GRAPH_ID, "assistant_id": ASSISTANT_ID}, thread_id=thread_id)
    try:
        handle = await start_run(runtime, thread_id, body, default_modes)
    except BaseException:
        await runtime.store.delete_thread(thread_id)
        raise
    return thread_id, handle


async def _start(
    request: Request, body: RunCreate, default_modes: tuple[str, ...] = DEFAULT_STREAM_MODES
) -> tuple[str, GatewayRuntime, RunHandle, dict[str, Any]]:
    runtime = runtime_of(request)
    thread_id, handle = await start_stateless(runtime, body, default_modes)
    return thread_id, runtime, handle, following(request, runtime, handle, body)


async def _forget(runtime: GatewayRuntime, thread_id: str, handle: RunHandle) -> None:
    await handle.wait()
    try:
        if await runtime.store.delete_thread(thread_id):
            states = getattr(runtime.agent_host, "thread_states", None)
            if states is not None:
                await states.delete(thread_id)
    except Exception as exc:  # the run's own outcome is saved; a leftover thread is all this costs
        logger.warning("stateless run %s: its thread %s could not be deleted: %s", handle.run_id, thread_id, exc)


def forget_after(runtime: GatewayRuntime, thread_id: str, handle: RunHandle, body: RunCreate) -> None:
    """Delete a stateless run's thread once the run ended, unless ``on_completion`` is ``keep``."""
    if body.on_completion == "keep":
        return
    task = asyncio.get_running_loop().create_task(_forget(runtime, thread_id, handle))
    _FORGETTING.add(task)
    task.add_done_callback(_FORGETTING.discard)


async def _then_forget(
    chunks: AsyncIterator[bytes], runtime: GatewayRuntime, thread_id: str, handle: RunHandle, body: RunCreate
) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        forget_after(runtime, thread_id, handle, body)


@router.post("/stream", responses=SSE_DOC, response_class=StreamingResponse)
async def stream_stateless_run(request: Request, body: RunCreate) -> StreamingResponse:
    """Run on a thread of its own and stream its events; the thread goes afterwards unless
    ``on_completion`` is ``keep``."""
    thread_id, runtime, handle, following = await _start(request, body)
    events = run_events(runtime, thread_id, handle.run_id, **following)
    headers = {**_paths(thread_id, handle.run_id), "Location": f"/threads/{thread_id}/runs/{handle.run_id}/stream"}
    return sse_response(_then_forget(events, runtime, thread_id, handle, body), headers)


@router.post("/wait", responses=_JSON_DOC, response_class=StreamingResponse)
async def wait_stateless_run(request: Request, body: RunCreate) -> StreamingResponse:
    """Run on a thread of its own and answer with its final values."""
    thread_id, runtime, handle, following = await _start(request, body, WAIT_STREAM_MODES)
    answer = _await_then_values(runtime, thread_id, handle.run_id, handle, handle.wait(), **following)
    return ListeningStreamingResponse(
        _then_forget(answer, runtime, thread_id, handle, body),
        media_type="application/json",
        headers=_paths(thread_id, handle.run_id),
    )


@router.post("", response_model=RunOut)
async def create_stateless_run(request: Request, body: RunCreate, response: Response) -> RunOut:
    """Run on a thread of its own in the background."""
    thread_id, runtime, handle, _ = await _start(request, body)
    out = await _run_out(runtime, thread_id, handle.run_id)
    forget_after(runtime, thread_id, handle, body)
    response.headers.update(_paths(thread_id, handle.run_id))
    return out
