"""The agent protocols through their official clients, on our Gateway and on LangGraph's server.

The same cases as a client of either server runs them: the ``mcp`` SDK's streamable-HTTP
client lists the assistants as tools and calls one; the ``a2a-sdk`` client fetches an
assistant's card, sends a message, streams one, gets the task and cancels one mid-stream. Both
servers mount the endpoints at their API root (``/mcp``, ``/a2a/{assistant_id}``, the card at
``/.well-known/agent-card.json``), ours being under ``/api``, so each path is the ``platform``
fixture's URL plus the same suffix. Where the two answer differently the case asserts each
server's answer (and README's divergence paragraph names it), so ``nox -s compat`` confirms every
named divergence; what the peer sends that the client cannot read is read on the wire. The MCP
client is the SDK's 1.x or 2.x, whichever is installed (tests/mcp_support.py). tests/protocols
covers what only ours serves (auth, HITL, a client that goes away, the LangChain adapters).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError
from mcp import ClientSession
from platform_support import Platform, human

from mcp_support import ProtocolError, input_schema, is_error, mcp_session, text_of

pytestmark = pytest.mark.e2e


async def _answer(platform: Platform, text: str, assistant_id: str = "lead_agent") -> str:
    """The final answer of a stateless ``runs.wait`` of ``text``: what a tool call or a task
    of the same input answers."""
    values = await get_client(url=platform.url, api_key=None).runs.wait(None, assistant_id, input=human(text))
    return str(values["messages"][-1]["content"])


# --- MCP ----------------------------------------------------------------------------------


def _mcp(platform: Platform) -> AbstractAsyncContextManager[ClientSession]:
    """The official client on the server's ``/mcp`` (tests/mcp_support.py: on the SDK's 1.x or 2.x)."""
    return mcp_session(f"{platform.url}/mcp")


@pytest.fixture
def travel_desk(platform: Platform) -> Iterator[dict[str, Any]]:
    """An assistant of its own for the case (the peer serves the whole suite: it goes after)."""
    client = get_sync_client(url=platform.url, api_key=None)
    label = uuid.uuid4().hex[:8]
    made = client.assistants.create("lead_agent", name=f"Travel desk {label}", description="Plans trips.")
    try:
        yield {**made, "tool": f"Travel_desk_{label}"}
    finally:
        client.assistants.delete(made["assistant_id"])


async def test_the_mcp_client_lists_the_assistants_as_tools(platform: Platform, travel_desk: dict[str, Any]) -> None:
    async with _mcp(platform) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert {"lead_agent", travel_desk["tool"]} <= set(tools)
    assert tools[travel_desk["tool"]].description == "Plans trips."
    for tool in (tools["lead_agent"], tools[travel_desk["tool"]]):
        assert input_schema(tool)["type"] == "object" and "messages" in input_schema(tool)["properties"]
    # A divergence: LangGraph's server gives the graph's input schema with `messages` a string
    # (one user message); ours a list of {role, content} messages, taking a string too.
    messages = input_schema(tools["lead_agent"])["properties"]["messages"]
    assert messages["type"] == ("string" if platform.is_peer else "array")


async def test_the_mcp_client_calls_an_assistant_and_gets_its_answer(
    platform: Platform, travel_desk: dict[str, Any]
) -> None:
    question = f"what is the capital of France? ({uuid.uuid4().hex[:6]})"
    answer = await _answer(platform, question, travel_desk["assistant_id"])
    async with _mcp(platform) as session:
        # Both the peer's advertised shape (the question as a string) and a list of messages.
        as_text = await session.call_tool(travel_desk["tool"], {"messages": question})
        as_list = await session.call_tool("lead_agent", {"messages": [{"role": "user", "content": question}]})
    for result in (as_text, as_list):
        assert not is_error(result), text_of(result)
        if platform.is_peer:
            # A divergence: LangGraph's server answers the repr of the run's whole final state;
            # ours the text of its final AI message.
            assert answer in text_of(result) and "messages" in text_of(result)
        else:
            assert text_of(result) == answer


async def test_an_mcp_call_asking_for_progress_gets_its_answer(platform: Platform) -> None:
    heard: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    question = f"how far is the moon? ({uuid.uuid4().hex[:6]})"
    answer = await _answer(platform, question)
    async with _mcp(platform) as session:
        result = await session.call_tool("lead_agent", {"messages": question}, progress_callback=progress)
    assert not is_error(result) and answer in text_of(result)
    # A divergence: ours tells each step of the run (an event-stream answer); LangGraph's
    # server answers JSON only, with no progress.
    assert (heard == []) if platform.is_peer else ("model" in heard)


async def test_an_mcp_call_of_an_unknown_tool_is_refused(platform: Platform) -> None:
    async with _mcp(platform) as session:
        if platform.is_peer:
            # A divergence: LangGraph's server refuses it as a JSON-RPC error (invalid params);
            # ours answers a tool error naming the tool.
            with pytest.raises(ProtocolError, match="Unknown tool"):
                await session.call_tool("nobody", {"messages": "hi"})
            return
        refused = await session.call_tool("nobody", {"messages": "hi"})
    assert is_error(refused) and "no tool named 'nobody'" in text_of(refused)


async def test_an_mcp_call_on_a_thread_continues_its_conversation(platform: Platform) -> None:
    thread = str(uuid.uuid4())
    sdk = get_client(url=platform.url, api_key=None)
    if platform.is_peer:
        # A divergence: LangGraph's MCP tools run stateless only; a thread_id argument is more
        # graph input, and no thread comes of it.
        async with _mcp(platform) as session:
            result = await session.call_tool("lead_agent", {"messages": "one", "thread_id": thread})
        assert not is_error(result), text_of(result)
        with pytest.raises(NotFoundError):
            await sdk.threads.get(thread)
        return
    async with _mcp(platform) as session:
        for text in ("one", "two"):
            result = await session.call_tool("lead_agent", {"messages": text, "thread_id": thread})
            assert not is_error(result), text_of(result)
    state = await sdk.threads.get_state(thread)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "human", "ai"]
    assert state["values"]["messages"][-1]["content"] == text_of(result)


# --- A2A ----------------------------------------------------------------------------------


def _message(text: str, *, context_id: str = "") -> SendMessageRequest:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id)
    return SendMessageRequest(message=message)


async def _default_assistant(platform: Platform) -> str:
    """The id of the graph's default assistant (the oldest). A divergence: LangGraph's server
    takes only an assistant's UUID at ``/a2a/`` and for the card; ours takes the graph's id too
    (the built-in assistant's id is ``lead_agent``)."""
    sdk = get_client(url=platform.url, api_key=None)
    [oldest] = await sdk.assistants.search(graph_id="lead_agent", sort_by="created_at", sort_order="asc", limit=1)
    return str(oldest["assistant_id"])


async def _client(platform: Platform, http: httpx.AsyncClient, *, streaming: bool) -> Client:
    assistant_id = await _default_assistant(platform)
    resolver = A2ACardResolver(
        http, platform.url, agent_card_path=f".well-known/agent-card.json?assistant_id={assistant_id}"
    )
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(await resolver.get_agent_card())


def _run_id(platform: Platform, task: Task) -> str:
    """The run behind a task. A divergence: LangGraph's task id is ``<context id>:<run id>``;
    ours is the run id. The context id is the thread's on both."""
    if platform.is_peer:
        assert task.id.startswith(f"{task.context_id}:")
        return task.id.removeprefix(f"{task.context_id}:")
    return task.id


def _answer_of(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts if part.text)


def _got_answer(platform: Platform, task: Task) -> str:
    """The answer a ``tasks/get`` carries. A divergence: LangGraph's server answers it without
    artifacts, the answer being the last agent message of ``history``; ours in the artifact, as
    ``message/send`` does."""
    if not platform.is_peer:
        return _answer_of(task)
    assert not task.artifacts
    agent = [m for m in task.history if m.role == Role.ROLE_AGENT]
    return "".join(part.text for part in agent[-1].parts) if agent else ""


def _unreadable(events: list[Any]) -> bool:
    """Whether a stream's events came in a shape the client cannot read. Not on purpose but
    LangGraph's (langgraph-api 0.16): its stream sends every event after the first in A2A 0.3's
    shape (``kind: status-update``) under its 1.0 card, which the a2a-sdk 1.x client reads as
    empty events; the case then reads them on the wire (:class:`_Wire`)."""
    return bool(events) and all(e.WhichOneof("payload") is None for e in events)


class _Wire(httpx.AsyncBaseTransport):
    """The client's HTTP transport, keeping what each event-stream answer carried, so a case
    can read on the wire what the client could not (:func:`_unreadable`)."""

    def __init__(self) -> None:
        self._http = httpx.AsyncHTTPTransport()
        self._streams: list[bytearray] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._http.handle_async_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        kept = bytearray()
        self._streams.append(kept)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Kept(response.stream, kept),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def last_stream(self) -> list[dict[str, Any]]:
        """The JSON-RPC results the last event stream sent, in order."""
        lines = self._streams[-1].decode().splitlines()
        return [json.loads(line[5:])["result"] for line in lines if line.startswith("data:")]


class _Kept(httpx.AsyncByteStream):
    def __init__(self, stream: Any, kept: bytearray) -> None:
        self._stream, self._kept = stream, kept

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._kept.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


async def test_the_a2a_card_names_the_assistant_and_its_endpoint(platform: Platform) -> None:
    assistant_id = await _default_assistant(platform)
    card_url = f"{platform.url}/.well-known/agent-card.json"
    async with httpx.AsyncClient(timeout=30) as http:
        card = await http.get(card_url, params={"assistant_id": assistant_id})
        assert card.status_code == 200, card.text
        body = card.json()
        assert body["name"] == "lead_agent" and body["capabilities"]["streaming"] is True
        assert {i["url"] for i in body["supportedInterfaces"]} == {f"{platform.url}/a2a/{assistant_id}"}
        assert {i["protocolBinding"] for i in body["supportedInterfaces"]} == {"JSONRPC"}
        unknown = await http.get(card_url, params={"assistant_id": str(uuid.uuid4())})
        by_graph = await http.get(card_url, params={"assistant_id": "lead_agent"})
    # Divergences: LangGraph's server answers an unknown assistant 400 (invalid params), ours
    # 404; it refuses a graph's id (400, not a UUID), ours takes it.
    assert unknown.status_code == (400 if platform.is_peer else 404)
    assert by_graph.status_code == (400 if platform.is_peer else 200)


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def test_the_a2a_endpoint_takes_the_graphs_id_and_refuses_an_unknown_assistant(platform: Platform) -> None:
    text = {"messageId": str(uuid.uuid4()), "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    async with httpx.AsyncClient(timeout=30) as http:
        # A task no one has: the answer says whether the assistant in the path was taken.
        by_graph = await http.post(f"{platform.url}/a2a/lead_agent", json=_rpc("tasks/get", {"id": str(uuid.uuid4())}))
        unknown = await http.post(f"{platform.url}/a2a/{uuid.uuid4()}", json=_rpc("message/send", {"message": text}))
    if platform.is_peer:
        # Divergences: LangGraph's server refuses a graph's id (not a UUID) and an unknown
        # assistant each as a JSON-RPC invalid-params error (HTTP 200); ours takes the graph's
        # id and answers an unknown assistant 404.
        for refused in (by_graph, unknown):
            assert refused.status_code == 200 and refused.json()["error"]["code"] == -32602, refused.text
        return
    assert by_graph.status_code == 200 and by_graph.json()["error"]["code"] == -32001, by_graph.text  # task not found
    assert unknown.status_code == 404, unknown.text


async def test_the_a2a_client_sends_gets_and_streams(platform: Platform) -> None:
    question = f"what is two and two? ({uuid.uuid4().hex[:6]})"
    answer = await _answer(platform, question)
    sdk = get_client(url=platform.url, api_key=None)
    wire = _Wire()
    async with httpx.AsyncClient(timeout=60, transport=wire) as http:
        sender = await _client(platform, http, streaming=False)
        [sent] = [event async for event in sender.send_message(_message(question))]
        task = sent.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert _answer_of(task) == answer
        # The task is a run of the context's thread.
        run = await sdk.runs.get(task.context_id, _run_id(platform, task))
        assert run["status"] == "success"
        got = await sender.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED and _got_answer(platform, got) == answer

        streamer = await _client(platform, http, streaming=True)
        events = [e async for e in streamer.send_message(_message("and three?", context_id=task.context_id))]
    assert events[0].task.context_id == task.context_id and events[0].task.id != task.id
    if platform.is_peer:
        # Not on purpose but LangGraph's (README): the client reads every event after the
        # first as empty (_unreadable); on the wire they are in A2A 0.3's envelope (a flat
        # object with `kind`, not 1.0's `statusUpdate`/`artifactUpdate`), 1.0's state names.
        assert _unreadable(events[1:])
        updates = wire.last_stream()[1:]
        kinds = [update["kind"] for update in updates]
        assert kinds[-1] == "status-update" and "artifact-update" in kinds, kinds
        assert updates[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
        parts = [part for u in updates if u["kind"] == "artifact-update" for part in u["artifact"]["parts"]]
        streamed = "".join(part.get("text", "") for part in parts)
    else:
        kinds = [event.WhichOneof("payload") for event in events]
        assert kinds[0] == "task" and kinds[-1] == "status_update" and "artifact_update" in kinds, kinds
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        streamed = "".join(
            part.text for e in events if e.HasField("artifact_update") for part in e.artifact_update.artifact.parts
        )
    state = await sdk.threads.get_state(task.context_id)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "human", "ai"]
    assert streamed == state["values"]["messages"][-1]["content"]


async def test_an_a2a_task_cancelled_mid_stream_ends_cancelled_and_frees_its_thread(platform: Platform) -> None:
    sdk = get_client(url=platform.url, api_key=None)
    wire = _Wire()
    async with httpx.AsyncClient(timeout=60, transport=wire) as http:
        client = await _client(platform, http, streaming=True)
        # Held in its model call: at our gate extension, in the peer graph's model.
        stream = client.send_message(_message(f"hold at gate:{uuid.uuid4().hex[:10]}"))
        first = await anext(stream)
        task = first.task
        run_id = _run_id(platform, task)
        for _ in range(500):
            run = await sdk.runs.get(task.context_id, run_id)
            if run["status"] == "running":
                break
            await asyncio.sleep(0.02)
        assert run["status"] == "running"
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        rest = await asyncio.wait_for(_rest(stream), 60)
        assert rest
        if platform.is_peer:
            # Not on purpose but LangGraph's (README): the client cannot read the stream's end
            # (_unreadable); on the wire the stream ends `completed`, the run cancelled.
            assert _unreadable(rest)
            assert wire.last_stream()[-1]["kind"] == "status-update"
            assert wire.last_stream()[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
        else:
            assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        assert (await sdk.runs.get(task.context_id, run_id))["status"] == "interrupted"
        assert (await sdk.threads.get(task.context_id))["status"] != "busy"
        # The thread is released: the context takes the next message at once.
        sender = await _client(platform, http, streaming=False)
        [after] = [e async for e in sender.send_message(_message("hello again", context_id=task.context_id))]
        assert after.task.status.state == TaskState.TASK_STATE_COMPLETED


async def _rest(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]
