"""``/api/mcp``: every assistant as a Model Context Protocol tool (streamable HTTP).

The official ``mcp`` SDK speaks the protocol; this module answers two of its requests. It
is the SDK's 1.x line: the agent's own MCP client (``mcp_servers/``, through
``langchain-mcp-adapters``) needs it in the same process, and one process has one SDK.
``tools/list`` names one tool per assistant (its name made tool-safe, its description, and
as input the messages a run takes plus an optional ``thread_id``). ``tools/call`` runs the
assistant as ``POST /runs/wait`` does — a stateless run, or a run on the caller's thread —
and answers with the text of its final AI message; a run that failed answers as a tool
error with its one line. A call whose client goes away (drops the connection) cancels the
run; so does the call's end at shutdown.

As LangGraph's server does, the transport is stateless with JSON responses: no session is
kept between requests (any Gateway process answers any request), and a
``notifications/cancelled`` (a request of its own) cannot reach the call it names: a client
stops a call by dropping it. A JSON response carries the call's result alone (the SDK drops
anything else tied to the request), so a ``tools/call`` whose client asks for progress (a
``_meta.progressToken``) and accepts an event stream is answered as one instead, by a second,
equally stateless, session manager: a ``notifications/progress`` for each step of the run (a
node's update: ``model``, ``tools``...), then the result. The common request of all — a
``tools/call`` that asks for no progress — never reaches the SDK's transport: ``mcp_calls.py``
answers it with the SDK's types, without the session the transport would build and tear
down around it (issue 59's cost guard: a call costs what ``runs.wait`` costs).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import mcp.types as mcp_types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from ..persistence.assistant_tables import BUILT_IN_ASSISTANT_ID
from ..persistence.assistants import AssistantQuery, AssistantStore
from .mcp_calls import PlainCall, plain_call, wants_progress
from .mcp_calls import answer as answer_call
from .runs import HEARTBEAT, RunCall, RunRefused, ServedRuns, StartedRun, answer_text, node_updates

__all__ = ["MESSAGES_INPUT", "McpEndpoint", "tool_names"]

logger = logging.getLogger("deerflow_ext.protocols")

_PAGE = 100
_DISCONNECT_POLL = 1.0  # seconds between asking whether the caller of a running call is still there
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

MESSAGES_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "messages": {
            "type": "array",
            "minItems": 1,
            "description": "The conversation to answer, oldest first; the last one is usually the user's.",
            "items": {
                "type": "object",
                "properties": {
                    "role": {"type": "string", "enum": ["user", "assistant", "system"]},
                    "content": {"type": "string"},
                },
                "required": ["role", "content"],
            },
        },
        "thread_id": {
            "type": "string",
            "description": (
                "Run on this thread (created when missing) so a later call continues the conversation; "
                "omitted, the run is stateless and its thread is deleted afterwards."
            ),
        },
    },
    "required": ["messages"],
}
"""A tool's input: the messages input of the assistant's graph, and the thread to run on."""


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("_")[:64]


def tool_names(assistants: list[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Tool name -> assistant row. A name is the assistant's, made tool-safe (letters,
    digits, ``_ . -``, 64 at most); an assistant whose name another one already took (or
    whose name has nothing tool-safe) is named by its id."""
    named: dict[str, Mapping[str, Any]] = {}
    for row in assistants:
        name = _safe(str(row.get("name") or ""))
        if not name or name in named:
            name = _safe(str(row["assistant_id"]))
        named.setdefault(name, row)
    return named


def _refusal(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], isError=True)


class McpEndpoint:
    """The ASGI endpoint the Gateway mounts at ``/api/mcp``; it serves while
    :meth:`serving` is entered (the Gateway's lifespan) and answers 503 otherwise."""

    def __init__(self, runs: ServedRuns, *, name: str, version: str, max_body_bytes: int) -> None:
        self._runs = runs
        self._name = name
        self._version = version
        self._max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None
        self._stream_manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """A session manager runs once (the SDK's rule), so each lifespan makes its own."""
        server: Server[Any, Any] = Server(
            self._name,
            version=self._version,
            instructions="Each tool is one of this Gateway's assistants: call it with the conversation to answer.",
        )
        server.list_tools()(self._list_tools)  # type: ignore[no-untyped-call]  # the SDK's 1.x decorators
        # The arguments are checked here, not against the schema by the SDK: a model calling
        # the tool may hand ``messages`` over as a string, which the schema does not admit.
        server.call_tool(validate_input=False)(functools.partial(self._call_tool, server))
        json_manager, stream_manager = (
            StreamableHTTPSessionManager(
                app=server,
                json_response=json_response,
                stateless=True,
                # The Gateway's front layer has already checked Host, Origin and the body's size.
                security_settings=None,
                max_request_body_size=self._max_body_bytes,
            )
            for json_response in (True, False)
        )
        async with json_manager.run(), stream_manager.run():
            self._manager, self._stream_manager = json_manager, stream_manager
            try:
                yield
            finally:
                self._manager = self._stream_manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager, stream_manager = self._manager, self._stream_manager
        if manager is None or stream_manager is None:
            answer = JSONResponse({"detail": "the Gateway is not serving (starting up or shutting down)"}, 503)
            await answer(scope, receive, send)
            return
        if scope.get("method") == "POST":
            body, replay = await _read_body(receive)
            call = plain_call(scope, body)
            if call is not None:  # the common request: answered without the SDK's session (mcp_calls.py)
                result = await self._answer_plain(call, Request(scope, receive))
                await answer_call(call, result)(scope, receive, send)
                return
            if _accepts_stream(scope) and wants_progress(_parsed(body)):
                manager = stream_manager
            receive = replay
        await manager.handle_request(scope, receive, send)

    async def _assistants(self) -> dict[str, Mapping[str, Any]]:
        store = AssistantStore(self._runs.serving().engine)
        rows: list[Mapping[str, Any]] = []
        offset = 0
        while True:
            page, more = await store.search(
                AssistantQuery(limit=_PAGE, offset=offset, sort_by="created_at", sort_order="asc")
            )
            rows.extend(page)
            if not more:
                return tool_names(rows)
            offset += _PAGE

    async def _list_tools(self) -> list[mcp_types.Tool]:
        return [
            mcp_types.Tool(
                name=name,
                description=row.get("description")
                or f"Ask the assistant {row.get('name') or name} (graph {row['graph_id']}).",
                inputSchema=MESSAGES_INPUT,
            )
            for name, row in (await self._assistants()).items()
        ]

    async def _call_tool(
        self, server: Server[Any, Any], name: str, given: dict[str, Any] | None
    ) -> mcp_types.CallToolResult:
        ctx = server.request_context
        wants = ctx.meta is not None and ctx.meta.progressToken is not None
        return await self._answer(name, given, ctx if wants else None, ctx.request)

    async def _answer_plain(self, call: PlainCall, request: Request) -> mcp_types.CallToolResult:
        """:meth:`_answer` as the SDK's tool handler wraps it: an exception is the call's
        error result, not the request's."""
        try:
            return await self._answer(call.name, call.arguments, None, request)
        except Exception as exc:
            logger.exception("MCP tools/call %r failed", call.name)
            return _refusal(str(exc))

    async def _answer(
        self, name: str, given: dict[str, Any] | None, progress_to: Any, request: Any
    ) -> mcp_types.CallToolResult:
        if name == BUILT_IN_ASSISTANT_ID:
            # The built-in assistant's row is the oldest, so it always holds its own name: the
            # common call reads no assistant, as a run addressed to it does not.
            assistant_id = BUILT_IN_ASSISTANT_ID
        else:
            try:
                row = (await self._assistants()).get(name)
            except RunRefused as exc:
                return _refusal(exc.message)
            if row is None:
                return _refusal(f"no tool named {name!r}; tools/list names this Gateway's assistants")
            assistant_id = str(row["assistant_id"])
        arguments = dict(given or {})
        messages = arguments.get("messages")
        if isinstance(messages, str):  # a model calling the tool may hand over the question alone
            messages = [{"role": "user", "content": messages}]
        if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
            return _refusal("arguments.messages: a list of {role, content} messages is required")
        thread_id = arguments.get("thread_id")
        if thread_id is not None and not isinstance(thread_id, str):
            return _refusal("arguments.thread_id: a string is required")
        call = RunCall(
            assistant_id=assistant_id,
            messages=tuple(messages),
            thread_id=thread_id or None,
            stream_modes=("updates",) if progress_to is not None else (),
        )
        return await self._run(call, progress_to, request)

    async def _run(self, call: RunCall, progress_to: Any, request: Any) -> mcp_types.CallToolResult:
        try:
            started = await self._runs.start(call)
        except RunRefused as exc:
            return _refusal(exc.message)
        finished = False
        reporting = asyncio.ensure_future(self._report_steps(started, progress_to)) if progress_to else None
        try:
            finished = await _ended_or_left(started.handle.finished, request)
            if reporting is not None and finished:
                # Every step is told before the result, which the SDK writes last.
                await asyncio.wait({reporting}, timeout=HEARTBEAT)
            if not finished:
                return _refusal("the caller went away; the run was cancelled")
            values = await self._runs.final_values(started)
        finally:
            if reporting is not None:
                reporting.cancel()
            with contextlib.suppress(RunRefused):  # the Gateway is shutting down: it stops the run
                if not finished:  # the client went away, or the Gateway stops the call: so does the run
                    self._runs.serving().runs.cancel_soon(started.run_id)
                self._runs.release(started)
        error = values.get("__error__")
        if isinstance(error, Mapping):
            return _refusal(f"the run failed: {error.get('error')}: {error.get('message')}")
        text = answer_text(values)
        if text is None:
            return _refusal("the run ended without an answer")
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])

    async def _report_steps(self, started: StartedRun, ctx: Any) -> None:
        """A progress notification for each node update of the run, numbered from 1 (the
        total is unknown: an agent decides its steps as it goes), named by its node."""
        step = 0
        async for update in node_updates(self._runs, started.run_id):
            if not update:
                continue
            step += 1
            try:
                await ctx.session.send_progress_notification(
                    ctx.meta.progressToken,
                    step,
                    None,
                    ", ".join(str(node) for node in update),
                    related_request_id=str(ctx.request_id),
                )
            except Exception:  # the stream closed (the caller went away): nobody left to tell
                logger.debug("MCP progress for run %s not delivered", started.run_id, exc_info=True)
                return


def _accepts_stream(scope: Scope) -> bool:
    if scope.get("method") != "POST":
        return False
    accept = b",".join(value for key, value in scope.get("headers", ()) if key == b"accept")
    return b"text/event-stream" in accept


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body; and a ``receive`` that hands it to the SDK again. The front layer
    bounds the body's size."""
    read: list[Message] = []
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break

    async def replay() -> Message:
        return read.pop(0) if read else await receive()

    return b"".join(bytes(m.get("body", b"")) for m in read if m["type"] == "http.request"), replay


def _parsed(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError:
        return None


async def _ended_or_left(finished: asyncio.Event, request: Any) -> bool:
    """Wait for the run's end (True), or for the caller to go away first (False).

    With JSON responses nothing of the SDK reads the connection while a call runs, so a
    client that dropped it would leave its run going to the end, and the server's graceful
    shutdown waiting for the request. The HTTP request the SDK hands the handler says
    whether its client is still there."""
    if not hasattr(request, "is_disconnected"):
        await finished.wait()
        return True
    waiting = asyncio.ensure_future(finished.wait())
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=_DISCONNECT_POLL)
            if done:
                return True
            if await request.is_disconnected():
                return False
    finally:
        waiting.cancel()
