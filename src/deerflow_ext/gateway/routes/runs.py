"""Runs on a thread: create, stream, wait, join, list, read, cancel, delete.

The run routes of the LangGraph Platform API. Stream routes answer with server-sent events
whose first event is ``metadata`` (``run_id``, ``thread_id``) and whose last is ``end``;
every event has an id, and ``GET .../runs/{run_id}/stream`` with ``Last-Event-ID`` resumes
after it. A new stream's response names its run in ``Content-Location``
(``/api/threads/{thread_id}/runs/{run_id}``, the header the SDKs read the run id from) and
its resume point in ``Location`` — relative to the API root (``/threads/.../stream``),
because both official SDKs join that path to their base URL (``http://host:8001/api``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse

from ...extensions.composition.plugin_tools import RUN_USER_CONTEXT_KEY
from ...identity import AuthenticatedUser, IdentityGate
from ...persistence.models import DEFAULT_USER_ID, RunStatus, ThreadStatus
from ...persistence.records import TEMPORARY, ThreadNotFoundError
from ...runtime.handle import RunHandle
from ...runtime.manager import MultitaskStrategy, RunsClosedError, ThreadBusyError
from ...runtime.stream_modes import API_STREAM_MODES, DEFAULT_STREAM_MODES, WAIT_STREAM_MODES
from ...runtime.wire import dumps, jsonable
from ...runtime.worker import LeadRunSpec
from ...webhooks import WebhookOrder
from ..assistants import resolve_assistant
from ..cron_schemas import CronCreate, CronOut
from ..crons import create_cron
from ..schemas import (
    ASSISTANT_ID,
    GRAPH_ID,
    MAX_OFFSET,
    NO_INPUT,
    THREAD_ID_PATTERN,
    RunCreate,
    RunOut,
    selected,
)
from ..scoping import RUN_USER_METADATA_KEY, authorized, request_user, run_owner, visible_thread
from ..sse import run_events, sse_response
from ..state import GatewayRuntime, runtime_of
from ..streaming import ListeningStreamingResponse
from ..webhook_orders import webhook_order

__all__ = ["SSE_DOC", "final_values", "following", "owned_run", "router", "start_run"]

router = APIRouter(prefix="/api/threads/{thread_id}/runs", tags=["runs"])

SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-sent events, one per line group: `event:` (metadata, values, updates, messages "
            "[messages-tuple], messages/metadata, messages/partial, messages/complete [messages], custom, "
            "debug, tasks, checkpoints, error, not_retained, end; `|namespace` suffixes with stream_subgraphs), "
            "`data:` (one line of JSON) and `id:` (send it back as Last-Event-ID to resume). "
            "`metadata` comes first and `end` last; `: heartbeat` comments keep the connection alive."
        ),
        "content": {
            "text/event-stream": {
                "schema": {"type": "string"},
                "example": 'event: metadata\ndata: {"run_id":"…","thread_id":"…"}\nid: 1\n\n',
            }
        },
    }
}
# The host's keys of a run's context; a client's value for one is dropped. The run's owner
# (``user_id``) is one: the host sets it from the run's recorded owner (``scoping.run_owner``).
# LangGraph's name for the user goes too: a caller cannot claim to be a user there either.
_OWNER_KEYS = (RUN_USER_CONTEXT_KEY, RUN_USER_METADATA_KEY)
_HOST_CONTEXT_KEYS = ("thread_id", "run_id", "task_id", "agent_name", *_OWNER_KEYS)


def _paths(thread_id: str, run_id: str) -> dict[str, str]:
    return {"Content-Location": f"/api/threads/{thread_id}/runs/{run_id}"}


def _heartbeat(request: Request) -> float:
    return float(request.app.state.options.sse_heartbeat)


def _ids(assistant_id: str) -> dict[str, str]:
    return {"graph_id": GRAPH_ID, "assistant_id": assistant_id}


_RUN_THREAD_METADATA = _ids(ASSISTANT_ID)


async def _create_missing_thread(
    runtime: GatewayRuntime, thread_id: str, body: RunCreate, ids: Mapping[str, Any]
) -> None:
    """The run's thread does not exist: create it (``if_not_exists: create``) or answer 404."""
    if body.if_not_exists != "create":
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    if not re.fullmatch(THREAD_ID_PATTERN, thread_id):
        raise HTTPException(
            status_code=422, detail=f"thread_id: {thread_id!r} is not a thread id (letters, digits, . : @ ~ -)"
        )
    await runtime.store.create_thread(dict(ids), thread_id=thread_id)


def _spec(
    body: RunCreate, default_modes: tuple[str, ...], ids: Mapping[str, str], webhook: WebhookOrder | None = None
) -> LeadRunSpec:
    config = body.config
    configurable = {k: v for k, v in (config.configurable if config else {}).items() if k not in _HOST_CONTEXT_KEYS}
    return LeadRunSpec(
        messages=tuple(m.for_graph() for m in body.input.messages) if body.input else (),
        goal=body.goal,
        context=_context(configurable, body),
        stream_modes=body.stream_modes_or(default_modes),
        subgraphs=body.stream_subgraphs,
        checkpoint_id=body.fork_checkpoint_id,
        recursion_limit=config.recursion_limit if config else None,
        tags=tuple(config.tags) if config else (),
        metadata={**body.metadata, **ids},
        durability=body.durability,
        delay=body.after_seconds or 0.0,
        command=body.command.as_mapping() if body.command is not None else None,
        interrupt_before=_nodes(body.interrupt_before),
        interrupt_after=_nodes(body.interrupt_after),
        webhook=webhook,
    )


def _context(configurable: dict[str, Any], body: RunCreate) -> dict[str, Any]:
    """The caller's context over its ``configurable``, without the host's keys (a caller's
    claim to be a user included: the host writes the run's owner itself)."""
    context = {**configurable, **body.context}
    for key in _OWNER_KEYS:
        context.pop(key, None)
    return context


def _nodes(nodes: str | list[str] | None) -> str | tuple[str, ...] | None:
    return nodes if nodes is None or isinstance(nodes, str) else tuple(nodes)


async def _check_pending(runtime: GatewayRuntime, thread_id: str, body: RunCreate) -> None:
    """A resume, and a run with no input at all (``continues``), need a thread its graph
    paused; a resume is refused 409 otherwise, a run without input 422 (its input is what is
    missing), each saying why.

    A resume of a thread that does not exist is a 404 even with ``if_not_exists: create``:
    a new thread has nothing to resume. A run without input on a paused thread goes on from
    its checkpoint, as on LangGraph's server (``interrupt_before``'s "continue"). Only these
    runs pay this read of the thread's state. A thread with a run in progress is left to
    ``multitask_strategy`` (an enqueued resume may follow the run that pauses)."""
    continues = body.continues
    if not continues and (body.command is None or not body.command.resumes):
        return
    record = await runtime.store.get_thread(thread_id)
    if record is None:
        if continues:
            raise HTTPException(status_code=422, detail=f"{NO_INPUT}; thread {thread_id} does not exist")
        raise HTTPException(
            status_code=404,
            detail=f"thread {thread_id} not found; there is nothing to resume (if_not_exists: create does not apply)",
        )
    if record.status == ThreadStatus.BUSY.value:
        return
    states = getattr(runtime.agent_host, "thread_states", None)
    snapshot = await states.get(thread_id) if states is not None else None
    if snapshot is None or not snapshot.next:
        if continues:
            raise HTTPException(
                status_code=422, detail=f"{NO_INPUT}; thread {thread_id} has nothing pending to continue"
            )
        raise HTTPException(
            status_code=409,
            detail=f"thread {thread_id} is not interrupted (status {record.status}); there is nothing to resume",
        )


_END = "__end__"


async def _check_goto(runtime: GatewayRuntime, body: RunCreate) -> None:
    """``command.goto`` names nodes of the graph (or ``__end__``): 422 naming any other."""
    goto = body.command.goto if body.command is not None else None
    if goto is None:
        return
    targets = goto if isinstance(goto, list) else [goto]
    names = [t if isinstance(t, str) else t.get("node") for t in targets]
    states = getattr(runtime.agent_host, "thread_states", None)
    if states is None:
        return
    nodes = set((await states.graph()).nodes) - {"__start__"}
    unknown = [repr(n) for n in names if not isinstance(n, str) or (n not in nodes and n != _END)]
    if unknown:
        raise HTTPException(
            status_code=422,
            detail=f"command.goto: no node {', '.join(unknown)} in the graph (its nodes: {', '.join(sorted(nodes))})",
        )


async def _start(
    runtime: GatewayRuntime,
    thread_id: str,
    body: RunCreate,
    default_modes: tuple[str, ...] = DEFAULT_STREAM_MODES,
    *,
    temporary: bool = False,
    request: Request | None = None,
    user_id: str = DEFAULT_USER_ID,
    owner_metadata: Mapping[str, Any] | None = None,
) -> RunHandle:
    """``temporary``: a stateless run whose thread goes when it ended; its row says so
    (``TEMPORARY``), so startup recovery deletes the thread if this process cannot.

    The run's owner: with ``request``, the request's principal (:func:`scoping.run_owner`;
    with ``auth`` the user, whose ``threads.create_run`` handler runs in :func:`owned_run`);
    without, ``user_id``, the owner a run started without a request is for (a cron's user, a
    stateless run's or a protocol's caller, an extension's agent-runs handle), which
    :func:`owned_run` already admitted when ``auth`` has users (``owner_metadata``: what it
    answered, a thread created for the run gets it). The owner is recorded as the run's
    ``user_id``, which the host sets as the run context's ``user_id``."""
    if request is not None:
        user_id = run_owner(request)
        user = request_user(request)
        if user is not None:
            body, owner_metadata = await _owned(request.app.state.identity, user, runtime, thread_id, body, temporary)
    assistant = await resolve_assistant(runtime, body.assistant_id)  # 404; none read for lead_agent
    body = assistant.under(body)  # its config and context beneath the run's own
    stored = body.model_dump(mode="json", exclude_none=True)
    stored.setdefault("goal", None)
    stored["assistant_id"] = assistant.assistant_id
    if temporary:
        stored[TEMPORARY] = True
    # What a LangGraph server records on the thread and the run's checkpoints: UIs find an
    # assistant's threads by these (thread search).
    ids = _RUN_THREAD_METADATA if assistant.assistant_id == ASSISTANT_ID else _ids(assistant.assistant_id)
    new_thread = {**owner_metadata, **ids} if owner_metadata else ids
    # Checked before the run exists: a refused URL is a 422 and no run starts.
    order = None if body.webhook is None else await webhook_order(runtime, body.webhook, stored)

    async def start() -> RunHandle:
        # The thread is checked with the run's row (one transaction): an existing thread,
        # the common case, costs no lookup of its own.
        return await runtime.runs.start(
            thread_id,
            spec=_spec(body, default_modes, ids, order),
            run_input=stored,
            multitask_strategy=MultitaskStrategy(body.multitask_strategy),
            thread_defaults=ids,
            user_id=user_id,
        )

    await _check_goto(runtime, body)
    await _check_pending(runtime, thread_id, body)
    try:
        try:
            return await start()
        except ThreadNotFoundError:
            await _create_missing_thread(runtime, thread_id, body, new_thread)
            return await start()
    except ThreadBusyError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from exc
    except RunsClosedError as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from exc


async def _owned(
    gate: IdentityGate,
    user: AuthenticatedUser,
    runtime: GatewayRuntime,
    thread_id: str,
    body: RunCreate,
    temporary: bool,
) -> tuple[RunCreate, dict[str, Any]]:
    """The run as its user may start it: the ``threads.create_run`` handler ran (its
    ``metadata`` changes kept, the user recorded under :data:`RUN_USER_METADATA_KEY` in the
    run's metadata), and the thread is one the user may see (else 404). Answers
    the run and the metadata a thread it creates gets (the handler's)."""
    value: dict[str, Any] = {
        "thread_id": None if temporary else thread_id,
        "assistant_id": body.assistant_id,
        "run_id": None,
        "status": "pending",
        "metadata": dict(body.metadata),
        "kwargs": {"input": body.input, "config": body.config, "context": body.context},
        "multitask_strategy": body.multitask_strategy,
        "if_not_exists": body.if_not_exists,
        "after_seconds": body.after_seconds,
        "prevent_insert_if_inflight": True,
        "action": None,
    }
    filters = await gate.authorize(user, "threads", "create_run", value)
    metadata = dict(value.get("metadata") or {})
    metadata[RUN_USER_METADATA_KEY] = user.identity
    if filters and not temporary and await runtime.store.get_thread(thread_id, filters) is None:
        if await runtime.store.get_thread(thread_id) is not None:
            raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    return body.model_copy(update={"metadata": metadata}), metadata


async def _run_out(runtime: GatewayRuntime, thread_id: str, run_id: str) -> RunOut:
    record = await runtime.store.get_run(thread_id, run_id)
    if record is None:
        raise HTTPException(status_code=404, detail=f"run {run_id} not found on thread {thread_id}")
    return RunOut.of(record)


def _cancel_on_disconnect(runtime: GatewayRuntime, run_id: str, cancel: bool) -> Callable[[], None] | None:
    return (lambda: runtime.runs.cancel_soon(run_id)) if cancel else None


def following(request: Request, runtime: GatewayRuntime, handle: RunHandle, body: RunCreate) -> dict[str, Any]:
    """How a run's response follows it: heartbeat, and what a dropped connection does
    (``on_disconnect``)."""
    on_disconnect = _cancel_on_disconnect(runtime, handle.run_id, body.on_disconnect == "cancel")
    return {"heartbeat": _heartbeat(request), "on_disconnect": on_disconnect}


async def _new_run(
    request: Request,
    thread_id: str,
    body: RunCreate,
    default_modes: tuple[str, ...] = DEFAULT_STREAM_MODES,
    *,
    temporary: bool = False,
) -> tuple[GatewayRuntime, RunHandle, dict[str, Any]]:
    """Start the run; the keywords say how its response follows it."""
    runtime = runtime_of(request)
    handle = await _start(runtime, thread_id, body, default_modes, temporary=temporary, request=request)
    return runtime, handle, following(request, runtime, handle, body)


@router.post("/stream", responses=SSE_DOC, response_class=StreamingResponse)
async def stream_run(request: Request, thread_id: str, body: RunCreate) -> StreamingResponse:
    """Create a run and stream its events (``on_disconnect``: what a dropped stream does)."""
    runtime, handle, following = await _new_run(request, thread_id, body)
    events = run_events(runtime, thread_id, handle.run_id, **following)
    headers = {**_paths(thread_id, handle.run_id), "Location": f"/threads/{thread_id}/runs/{handle.run_id}/stream"}
    return sse_response(events, headers)


@router.post("", response_model=RunOut)
async def create_run(request: Request, thread_id: str, body: RunCreate, response: Response) -> RunOut:
    """Create a run in the background; its events can be joined with ``GET .../stream``."""
    runtime = runtime_of(request)
    handle = await _start(runtime, thread_id, body, request=request)
    response.headers.update(_paths(thread_id, handle.run_id))
    return await _run_out(runtime, thread_id, handle.run_id)


async def _final_values(
    runtime: GatewayRuntime, thread_id: str, run_id: str, known: Mapping[str, Any] | None = None
) -> Any:
    """LangGraph's answer to wait/join: the thread's values, or ``__error__`` for a failed run.

    ``known``: the values a successful run of this process ended with (``RunHandle``), which
    spares reading the run and the thread back (two queries and a state snapshot
    per ``/wait``)."""
    if known is not None:
        return jsonable(known)
    record = await runtime.store.get_run(thread_id, run_id)
    if record is not None and record.status == RunStatus.ERROR.value:
        name, _, message = (record.error or "Error").partition(": ")
        return {"__error__": {"error": name, "message": message}}
    states = getattr(runtime.agent_host, "thread_states", None)
    snapshot = await states.get(thread_id) if states is not None else None
    return jsonable(snapshot.values) if snapshot is not None else {}


async def _await_then_values(
    runtime: GatewayRuntime,
    thread_id: str,
    run_id: str,
    handle: RunHandle | None,
    done: Awaitable[None],
    *,
    heartbeat: float,
    on_disconnect: Callable[[], None] | None,
) -> AsyncIterator[bytes]:
    """A JSON body that arrives when the run ended; a newline every ``heartbeat`` seconds
    before it keeps proxies from closing a long wait (JSON allows leading whitespace)."""
    waiting = asyncio.ensure_future(done)
    finished = False
    try:
        while not finished:
            finished = (await asyncio.wait({waiting}, timeout=heartbeat))[0] != set()
            if not finished:
                yield b"\n"
        waiting.result()
        known = handle.final_values if handle is not None else None
        yield dumps(await _final_values(runtime, thread_id, run_id, known)).encode()
    finally:
        if not finished:
            waiting.cancel()
            if on_disconnect is not None:
                on_disconnect()


_JSON_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The thread's state values once the run ended, or {'__error__': {...}} if it failed.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


@router.post("/wait", responses=_JSON_DOC, response_class=StreamingResponse)
async def wait_run(request: Request, thread_id: str, body: RunCreate) -> StreamingResponse:
    """Create a run and answer with the thread's values when it ended."""
    runtime, handle, following = await _new_run(request, thread_id, body, WAIT_STREAM_MODES)
    body_bytes = _await_then_values(runtime, thread_id, handle.run_id, handle, handle.wait(), **following)
    headers = {**_paths(thread_id, handle.run_id), "Location": f"/threads/{thread_id}/runs/{handle.run_id}/join"}
    return ListeningStreamingResponse(body_bytes, media_type="application/json", headers=headers)


@router.post("/crons", response_model=CronOut)
async def create_thread_cron(request: Request, thread_id: str, body: CronCreate) -> CronOut:
    """Schedule runs on this thread (five cron fields, UTC unless ``timezone``): ``crons``."""
    return await create_cron(runtime_of(request), body, thread_id, request)


@router.get("", response_model=None, responses={200: {"model": list[RunOut]}})
async def list_runs(
    request: Request,
    thread_id: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    status: Literal["pending", "running", "success", "error", "interrupted", "timeout"] | None = None,
    select: Annotated[list[str] | None, Query()] = None,
) -> Any:
    """The thread's runs, oldest first."""
    runtime = runtime_of(request)
    filters = None
    if request.scope.get("user") is not None:  # runs are their thread's: its read handler
        filters = await authorized(request, "threads", "read", {"thread_id": thread_id})
    if await runtime.store.get_thread(thread_id, filters) is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    records = await runtime.store.list_runs(thread_id, limit=limit, offset=offset, status=status)
    return [selected(RunOut.of(r).model_dump(mode="json"), select) for r in records]


@router.get("/{run_id}", response_model=RunOut)
async def get_run(request: Request, thread_id: str, run_id: str) -> RunOut:
    runtime = runtime_of(request)
    await visible_thread(request, runtime, thread_id, "read", {"thread_id": thread_id, "run_id": run_id})
    return await _run_out(runtime, thread_id, run_id)


@router.delete("/{run_id}", status_code=204)
async def delete_run(request: Request, thread_id: str, run_id: str) -> Response:
    """Delete a finished run's record (a pending or running run must be cancelled first)."""
    runtime = runtime_of(request)
    await visible_thread(request, runtime, thread_id, "delete", {"thread_id": thread_id, "run_id": run_id})
    out = await _run_out(runtime, thread_id, run_id)
    if out.status in (RunStatus.PENDING.value, RunStatus.RUNNING.value):
        raise HTTPException(status_code=409, detail=f"run {run_id} is {out.status}; cancel it first")
    await runtime.store.delete_run(thread_id, run_id)
    return Response(status_code=204)


@router.post("/{run_id}/cancel", response_model=RunOut, status_code=202)
async def cancel_run(
    request: Request,
    thread_id: str,
    run_id: str,
    response: Response,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> RunOut:
    """Ask the run to stop; it persists as ``interrupted`` once its ``on_task_stop`` returned.

    ``action=rollback`` also restores the thread's state to before the run. ``wait=1``
    answers (200) once the run has ended, with its final record. A run that already
    finished is returned unchanged (cancel is idempotent), so a client racing the run's end
    does not get an error for a stop that no longer matters. Any Gateway process can
    receive it: a run owned by another process is cancelled there.
    """
    runtime = runtime_of(request)
    value = {"thread_id": thread_id, "run_id": run_id, "action": action}
    await visible_thread(request, runtime, thread_id, "update", value)
    out = await _run_out(runtime, thread_id, run_id)
    await runtime.runs.request_cancel(run_id, out.status, rollback=action == "rollback")
    if not wait:
        return out
    await runtime.runs.wait_done(thread_id, run_id)
    response.status_code = 200
    return await _run_out(runtime, thread_id, run_id)


@router.get("/{run_id}/join", responses=_JSON_DOC, response_class=StreamingResponse)
async def join_run(
    request: Request, thread_id: str, run_id: str, cancel_on_disconnect: bool = False
) -> StreamingResponse:
    """Wait for the run to end and answer with the thread's values (any Gateway process)."""
    runtime = runtime_of(request)
    await visible_thread(request, runtime, thread_id, "read", {"thread_id": thread_id, "run_id": run_id})
    await _run_out(runtime, thread_id, run_id)
    body_bytes = _await_then_values(
        runtime,
        thread_id,
        run_id,
        None,  # the thread's values as they are now: the run may have ended long ago
        runtime.runs.wait_done(thread_id, run_id),
        heartbeat=_heartbeat(request),
        on_disconnect=_cancel_on_disconnect(runtime, run_id, cancel_on_disconnect),
    )
    return ListeningStreamingResponse(body_bytes, media_type="application/json")


def _modes(stream_mode: list[str] | None) -> frozenset[str] | None:
    modes = frozenset(m for m in stream_mode or () if m)
    unknown = sorted(modes - set(API_STREAM_MODES))
    if unknown:
        raise HTTPException(status_code=422, detail=f"stream_mode: unknown mode(s) {', '.join(unknown)}")
    return modes or None


@router.get("/{run_id}/stream", responses=SSE_DOC, response_class=StreamingResponse)
@router.post("/{run_id}/stream", responses=SSE_DOC, response_class=StreamingResponse, include_in_schema=False)
async def join_stream(
    request: Request,
    thread_id: str,
    run_id: str,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    action: Literal["interrupt", "rollback"] | None = None,
) -> StreamingResponse:
    """Join a run's stream, from its first event or after ``Last-Event-ID``.

    ``stream_mode`` narrows the events to those modes (of the ones the run streams).
    ``POST`` with ``action`` cancels the run first and streams it to its end (a stop button).
    """
    runtime = runtime_of(request)
    await visible_thread(request, runtime, thread_id, "read", {"thread_id": thread_id, "run_id": run_id})
    out = await _run_out(runtime, thread_id, run_id)
    modes = _modes(stream_mode)
    live = out.status in (RunStatus.PENDING.value, RunStatus.RUNNING.value)
    if action is not None:
        await runtime.runs.request_cancel(run_id, out.status, rollback=action == "rollback")
    if live and runtime.runs.get(run_id) is None and not runtime.runs.streams.shared:
        raise HTTPException(
            status_code=409,
            detail=(
                f"run {run_id} runs in another Gateway process and streams are per process here; "
                "set DEERFLOW_REDIS_URL so every process can serve every run's stream"
            ),
        )
    events = run_events(
        runtime,
        thread_id,
        run_id,
        after=last_event_id,
        modes=modes,
        heartbeat=_heartbeat(request),
        on_disconnect=_cancel_on_disconnect(runtime, run_id, cancel_on_disconnect),
    )
    return sse_response(events, _paths(thread_id, run_id))


# The run machinery under the routes, by name for the stateless routes and the agent
# protocols (``protocols/``), which start and answer runs exactly as these routes do.
start_run = _start
final_values = _final_values
owned_run = _owned
