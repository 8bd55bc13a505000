"""``/api/a2a/{assistant_id}``: the official A2A client (``a2a-sdk``) fetches an assistant's
card, sends and streams messages, gets and cancels tasks, and answers an interrupt (real
uvicorn, embedded model, SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value
from protocol_support import gateway

from live_uvicorn import LiveServer


def _message(text: str = "", *, context_id: str = "", task_id: str = "", data: Any = None) -> SendMessageRequest:
    part = Part(text=text)
    if data is not None:
        value = Value()
        value.struct_value.update(data)
        part = Part(data=value)
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[part], context_id=context_id, task_id=task_id
    )
    return SendMessageRequest(message=message)


async def _client(served: LiveServer, http: httpx.AsyncClient, assistant_id: str, *, streaming: bool) -> Client:
    resolver = A2ACardResolver(
        http, f"{served.base_url}/api", agent_card_path=f".well-known/agent-card.json?assistant_id={assistant_id}"
    )
    card = await resolver.get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


async def _wait_answer(http: httpx.AsyncClient, text: str) -> str:
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}}
    answer = await http.post("/api/runs/wait", json=body)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["messages"][-1]["content"])


async def _events(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


async def test_the_card_send_get_and_stream(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url) as served, served.client() as http:
        card = (await http.get("/api/.well-known/agent-card.json", params={"assistant_id": "lead_agent"})).json()
        assert card["name"] == "lead_agent" and card["capabilities"]["streaming"] is True
        assert {i["url"] for i in card["supportedInterfaces"]} == {f"{served.base_url}/api/a2a/lead_agent"}
        assert (
            await http.get("/api/.well-known/agent-card.json", params={"assistant_id": "nobody"})
        ).status_code == 404

        sender = await _client(served, http, "lead_agent", streaming=False)
        [sent] = await _events(sender.send_message(_message("what is two and two?")))
        task = sent.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        answer = task.artifacts[0].parts[0].text
        assert answer == await _wait_answer(http, "what is two and two?")
        # The task is the run, the context its thread.
        run = (await http.get(f"/api/threads/{task.context_id}/runs/{task.id}")).json()
        assert run["status"] == "success"
        got = await sender.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED and got.artifacts[0].parts[0].text == answer

        streamer = await _client(served, http, "lead_agent", streaming=True)
        events = await _events(streamer.send_message(_message("and three?", context_id=task.context_id)))
        kinds = [event.WhichOneof("payload") for event in events]
        assert kinds[0] == "task" and kinds[-1] == "status_update" and "artifact_update" in kinds
        updates = [e.status_update for e in events if e.HasField("status_update")]
        assert {u.status.state for u in updates[:-1]} == {TaskState.TASK_STATE_WORKING}
        working = [u.status.message.parts[0].text for u in updates[:-1]]
        streamed = events[0].task
        assert streamed.context_id == task.context_id and streamed.id != task.id
        final = events[-1].status_update.status.state
        assert final == TaskState.TASK_STATE_COMPLETED
        last_answer = next(e.artifact_update.artifact.parts[0].text for e in events if e.HasField("artifact_update"))
        assert working == [last_answer]
        state = (await http.get(f"/api/threads/{task.context_id}/state")).json()
        assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "human", "ai"]
        assert state["values"]["messages"][-1]["content"] == last_answer


async def test_a_task_cancelled_mid_stream_ends_cancelled_and_frees_its_thread(
    tmp_path: Path, database_url: str
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    plugins = [{"name": "gate", "use": "gateway.sdk_gate_ext:install", "config": {"gate_dir": str(gates)}}]
    async with gateway(tmp_path, database_url, plugins=plugins) as served, served.client() as http:
        client = await _client(served, http, "lead_agent", streaming=True)
        stream = client.send_message(_message("hold at gate:a2a-cancel"))
        first = await anext(stream)
        task_id, thread_id = first.task.id, first.task.context_id
        for _ in range(500):  # the run holds at the gate: running
            run = (await http.get(f"/api/threads/{thread_id}/runs/{task_id}")).json()
            if run["status"] == "running":
                break
            await asyncio.sleep(0.02)
        assert run["status"] == "running"
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        rest = await asyncio.wait_for(_events(stream), 60)
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        assert (await http.get(f"/api/threads/{thread_id}/runs/{task_id}")).json()["status"] == "interrupted"
        assert (await http.get(f"/api/threads/{thread_id}")).json()["status"] != "busy"
        # The thread is released: the context takes the next message at once.
        [after] = await _events(
            (await _client(served, http, "lead_agent", streaming=False)).send_message(
                _message("hello again", context_id=thread_id)
            )
        )
        assert after.task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_an_interrupt_is_input_required_and_a_follow_up_resumes_it(tmp_path: Path, database_url: str) -> None:
    plugins = [{"name": "hitl", "use": "platform_api.hitl_ext:install"}]
    async with gateway(tmp_path, database_url, plugins=plugins) as served, served.client() as http:
        client = await _client(served, http, "lead_agent", streaming=False)
        [paused] = await _events(client.send_message(_message("delegate: count the stars")))
        task = paused.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # What the graph asks comes as data: HumanInTheLoopMiddleware's request for the task call.
        [asked] = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
        [request] = asked["interrupts"][0]["action_requests"]
        assert request["name"] == "task"
        decision = {"decisions": [{"type": "reject", "message": "not today"}]}
        [resumed] = await _events(
            client.send_message(_message(context_id=task.context_id, task_id=task.id, data=decision))
        )
        assert resumed.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert resumed.task.context_id == task.context_id
        state = (await http.get(f"/api/threads/{task.context_id}")).json()
        assert state["status"] == "idle"
        # The paused task is answered: a second follow-up to it is refused.
        with pytest.raises(Exception, match="only an input-required task"):
            await _events(client.send_message(_message("again", context_id=task.context_id, task_id=task.id)))


async def test_disable_a2a_leaves_the_paths_unserved(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url, http={"disable_a2a": True}) as served, served.client() as http:
        card = await http.get("/api/.well-known/agent-card.json", params={"assistant_id": "lead_agent"})
        assert card.status_code == 404
        rpc = await http.post("/api/a2a/lead_agent", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
        assert rpc.status_code == 404


async def test_the_0_3_wire_methods_langgraph_documents_are_served(tmp_path: Path, database_url: str) -> None:
    """``message/send`` and ``tasks/get`` as a 0.3 client (LangGraph's documented examples) sends them."""
    async with gateway(tmp_path, database_url) as served, served.client() as http:
        message = {"role": "user", "parts": [{"kind": "text", "text": "hello"}], "messageId": str(uuid.uuid4())}
        sent = await http.post(
            "/api/a2a/lead_agent",
            json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}},
        )
        task = sent.json()["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed", sent.text
        assert task["artifacts"][0]["parts"][0]["text"] == await _wait_answer(http, "hello")
        got = await http.post(
            "/api/a2a/lead_agent", json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}}
        )
        assert got.json()["result"]["status"]["state"] == "completed"
        unknown = await http.post(
            "/api/a2a/nobody", json={"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": task["id"]}}
        )
        assert unknown.status_code == 404
