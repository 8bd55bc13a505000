"""Stateless runs: ``POST /api/runs/stream``, ``/api/runs/wait`` and ``/api/runs``.

LangGraph Platform runs a graph without a thread the client made: the server makes one for
the run and, once the run ended, deletes it (``on_completion: delete``, the default) or
keeps it (``keep``: the client can read it from the run's ``thread_id``). Here the thread is
an ordinary one, so the run goes through the same admission, hooks, persistence and stream
as any other; only its end differs.

The thread is deleted after the run ended *and* its answer went out: the ``/wait`` answer of
a failed run is read from the run's row, which goes with the thread. A client may post more
runs on it (its id is in ``Content-Location``): the thread then goes after the last of them,
as ``on_completion: delete`` promises. The run's row says its thread is temporary
(``persistence.records.TEMPORARY``), so a process killed before it could delete the thread
leaves the deletion to the next start (:func:`delete_left_threads`, startup recovery).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import StreamingResponse

from ...persistence.models import DEFAULT_USER_ID
from ...persistence.records import HostStore
from ...runtime.handle import RunHandle
from ...runtime.stream_modes import DEFAULT_STREAM_MODES, WAIT_STREAM_MODES
from ..schemas import ASSISTANT_ID, GRAPH_ID, NO_INPUT, RunCreate, RunOut
from ..scoping import request_user, run_owner
from ..sse import run_events, sse_response
from ..state import GatewayRuntime, runtime_of
from ..streaming import ListeningStreamingResponse
from .runs import _JSON_DOC, SSE_DOC, _await_then_values, _paths, _run_out, following, owned_run, start_run

__all__ = ["delete_left_threads", "forget_after", "router", "start_stateless"]

router = APIRouter(prefix="/api/runs", tags=["runs"])
logger = logging.getLogger("deerflow_ext.gateway")

_FORGETTING: set[asyncio.Task[None]] = set()
"""Deletions waiting for their run's end (held so the loop does not drop them)."""


async def start_stateless(
    runtime: GatewayRuntime,
    body: RunCreate,
    default_modes: tuple[str, ...] = DEFAULT_STREAM_MODES,
    request: Request | None = None,
    *,
    user_id: str = DEFAULT_USER_ID,
    owner_metadata: Mapping[str, Any] | None = None,
) -> tuple[str, RunHandle]:
    """The run on a new thread; a run refused (bad assistant, shutting down) takes it along.

    The routes below, a stateless cron's firing (``crons``) and the agent protocols
    (``protocols/``: an MCP tool call, an A2A message) start a stateless run through this one
    function. The run's owner is ``request``'s (``scoping.run_owner``; with ``auth`` its
    user's ``threads.create_run`` handler runs first), else ``user_id`` (a cron's user, a
    protocol's caller), whose ``owner_metadata`` the new thread gets."""
    if body.continues:  # a new thread has nothing to continue
        raise HTTPException(status_code=422, detail=f"{NO_INPUT}; a stateless run has no thread to continue")
    thread_id = str(uuid.uuid4())
    metadata: dict[str, Any] = {"graph_id": GRAPH_ID, "assistant_id": ASSISTANT_ID}
    if request is not None:
        user_id = run_owner(request)
        user = request_user(request)
        if user is not None:  # the user's run and thread
            body, owner_metadata = await owned_run(request.app.state.identity, user, runtime, thread_id, body, True)
    if owner_metadata:
        metadata = {**owner_metadata, **metadata}
    await runtime.store.create_thread(metadata, thread_id=thread_id)
    try:
        temporary = body.on_completion != "keep"
        handle = await start_run(runtime, thread_id, body, default_modes, temporary=temporary, user_id=user_id)
    except BaseException:
        await runtime.store.delete_thread(thread_id)
        raise
    return thread_id, handle


async def _start(
    request: Request, body: RunCreate, default_modes: tuple[str, ...] = DEFAULT_STREAM_MODES
) -> tuple[str, GatewayRuntime, RunHandle, dict[str, Any]]:
    runtime = runtime_of(request)
    thread_id, handle = await start_stateless(runtime, body, default_modes, request)
    return thread_id, runtime, handle, following(request, runtime, handle, body)


_OTHER_PROCESS_POLL = 0.5
"""How often a deletion waiting for another process's run on the thread asks again."""


async def _delete(store: HostStore, agent_host: Any, thread_id: str) -> bool | None:
    """The thread and its checkpoints: True; False when gone already; None while a run holds it."""
    deleted = await store.delete_thread(thread_id)
    if deleted:
        states = getattr(agent_host, "thread_states", None)
        if states is not None:
            await states.delete(thread_id)
    return deleted


async def _forget(runtime: GatewayRuntime, thread_id: str, handle: RunHandle) -> None:
    """Delete the thread once no run holds it: after this run, and after any run a client
    posted on it meanwhile (this process's are awaited, another process's polled for)."""
    await handle.wait()
    try:
        while await _delete(runtime.store, runtime.agent_host, thread_id) is None:
            others = runtime.runs.active_on(thread_id)
            if others:
                await asyncio.gather(*(other.wait() for other in others))
            else:
                await asyncio.sleep(_OTHER_PROCESS_POLL)
    except Exception as exc:  # the run's own outcome is saved; the next start deletes what is left
        logger.warning("stateless run %s: its thread %s could not be deleted: %s", handle.run_id, thread_id, exc)


async def delete_left_threads(store: HostStore, agent_host: Any) -> int:
    """Startup recovery: delete the threads of stateless runs that a process which is gone
    left behind (killed during the run, or before it deleted the thread); how many."""
    count = 0
    for thread_id in await store.temporary_threads_left():
        if await _delete(store, agent_host, thread_id):
            count += 1
    return count


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
