"""``/api/mcp``: the official MCP client and LangChain's MCP adapters use the Gateway's
assistants as tools (real uvicorn, SQLite and PostgreSQL; the embedded model, and a real
``ChatOpenAI`` against the loopback provider on both sides of the adapters)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from protocol_support import TOKEN, gateway

from fake_openai import FakeOpenAI

_AUTH = {"Authorization": f"Bearer {TOKEN}"}
_HERE = Path(__file__).parent


def _text(result: Any) -> str:
    return "".join(part.text for part in result.content if part.type == "text")


async def _wait_answer(client: httpx.AsyncClient, assistant_id: str, text: str, **extra: Any) -> str:
    body = {"assistant_id": assistant_id, "input": {"messages": [{"role": "user", "content": text}]}, **extra}
    answer = await client.post("/api/runs/wait", json=body, headers=_AUTH)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["messages"][-1]["content"])


async def test_the_official_client_lists_the_assistants_and_calls_one(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url, gateway={"api_token": TOKEN}) as served, served.client() as http:
        made = await http.post(
            "/api/assistants",
            json={"graph_id": "lead_agent", "name": "Travel desk", "description": "Plans trips."},
            headers=_AUTH,
        )
        assert made.status_code == 200, made.text
        url = f"{served.base_url}/api/mcp"
        async with (
            httpx.AsyncClient(headers=_AUTH, timeout=60) as mcp_http,
            streamable_http_client(url, http_client=mcp_http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"lead_agent", "Travel_desk"}
            assert tools["Travel_desk"].description == "Plans trips."
            assert tools["Travel_desk"].inputSchema["required"] == ["messages"]

            question = "what is the capital of France?"
            result = await session.call_tool("Travel_desk", {"messages": [{"role": "user", "content": question}]})
            assert not result.isError, _text(result)
            # The tool answers what /runs/wait answers for the same input: the same run machinery.
            assert _text(result) == await _wait_answer(http, made.json()["assistant_id"], question)

            # A stateless call leaves no thread behind; one on a thread keeps the conversation there.
            thread = "mcp-thread-1"
            first = await session.call_tool(
                "lead_agent", {"messages": [{"role": "user", "content": "one"}], "thread_id": thread}
            )
            second = await session.call_tool(
                "lead_agent", {"messages": [{"role": "user", "content": "two"}], "thread_id": thread}
            )
            assert not first.isError and not second.isError
            state = (await http.get(f"/api/threads/{thread}/state", headers=_AUTH)).json()
            assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "human", "ai"]
            assert state["values"]["messages"][-1]["content"] == _text(second)

            refused = await session.call_tool("nobody", {"messages": [{"role": "user", "content": "hi"}]})
            assert refused.isError and "no tool named 'nobody'" in _text(refused)
            bad = await session.call_tool("lead_agent", {"messages": [{"role": "robot", "content": "hi"}]})
            assert bad.isError and "messages.0" in _text(bad)

        # The front layer guards the endpoint like every route: no token, no MCP.
        unauthorised = await http.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert unauthorised.status_code == 401
        threads = (await http.post("/api/threads/search", json={"limit": 100}, headers=_AUTH)).json()
        assert [t["thread_id"] for t in threads] == [thread]


async def test_a_call_asking_for_progress_hears_each_step_of_the_run(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url) as served, served.client() as http:
        heard: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            heard.append((done, total, message))

        async with (
            httpx.AsyncClient(timeout=60) as mcp_http,
            streamable_http_client(f"{served.base_url}/api/mcp", http_client=mcp_http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            thread = "mcp-progress"
            result = await session.call_tool(
                "lead_agent", {"messages": "hello there", "thread_id": thread}, progress_callback=progress
            )
            assert not result.isError, _text(result)
            assert _text(result) == await _wait_answer(http, "lead_agent", "hello there")
            quiet = await session.call_tool("lead_agent", {"messages": "and again"})  # no token: a JSON answer
            assert not quiet.isError
        # One notification per node update of the run, in order, told before the result.
        [run] = (await http.get(f"/api/threads/{thread}/runs")).json()
        assert heard and [done for done, _, _ in heard] == list(range(1, len(heard) + 1))
        assert {total for _, total, _ in heard} == {None}
        assert "model" in {message for _, _, message in heard}
        assert run["status"] == "success"


def _ask_the_gateway(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """The loopback provider's tool choice: the client agent (offered ``lead_agent``) asks
    the Gateway once; the Gateway's own lead agent (offered its built-in tools) just answers."""
    offered = {tool["function"]["name"] for tool in body.get("tools", ())}
    if "lead_agent" not in offered or any(m.get("role") == "tool" for m in body["messages"]):
        return None
    question = next(m["content"] for m in reversed(body["messages"]) if m.get("role") == "user")
    return [("lead_agent", {"messages": question})]


async def test_a_langchain_agent_in_another_process_uses_the_gateway_as_a_tool(
    tmp_path: Path, database_url: str
) -> None:
    """The client agent runs once on the embedded model and once on ``ChatOpenAI``; the
    Gateway's own agent answers on ``ChatOpenAI`` (both against the loopback provider)."""
    with FakeOpenAI(call_tools=_ask_the_gateway) as fake:
        entry = {"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "gpt-x", "api_key": "k"}
        config = {"models": [{**entry, "base_url": fake.base_url}], "title": {"enabled": False}}
        async with gateway(tmp_path, database_url, **config) as served, served.client() as http:
            src = str(Path(__file__).parents[2] / "src")
            agent = await asyncio.create_subprocess_exec(
                sys.executable,
                str(_HERE / "adapters_agent.py"),
                f"{served.base_url}/api/mcp",
                "hello there",
                fake.base_url,
                env={**os.environ, "PYTHONPATH": src},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(agent.communicate(), 120)
            assert agent.returncode == 0, err.decode()[-2000:]
            report = json.loads(out.decode().strip().splitlines()[-1])
            answer = await _wait_answer(http, "lead_agent", "hello there")
        assert report["tools"] == ["lead_agent"]
        assert report["embedded"] == report["chat_openai"] == [answer] == ["Echo: hello there"]


async def test_a_call_whose_client_goes_away_cancels_its_run(tmp_path: Path, database_url: str) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    plugins = [{"name": "gate", "use": "gateway.sdk_gate_ext:install", "config": {"gate_dir": str(gates)}}]
    async with gateway(tmp_path, database_url, plugins=plugins) as served, served.client() as http:
        messages = [{"role": "user", "content": "hold at gate:mcp-gone"}]
        call = {"name": "lead_agent", "arguments": {"messages": messages, "thread_id": "mcp-gone"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        with pytest.raises(httpx.TimeoutException):  # the run holds at the gate; the client gives up
            await http.post("/api/mcp", json=body, headers=headers, timeout=2)
        # So does one asking for progress, answered as an event stream.
        call = {**call, "arguments": {**call["arguments"], "thread_id": "mcp-gone-2"}, "_meta": {"progressToken": 7}}
        with pytest.raises(httpx.TimeoutException):
            await http.post("/api/mcp", json={**body, "params": call}, headers=headers, timeout=2)
        for thread in ("mcp-gone", "mcp-gone-2"):
            for _ in range(300):
                [run] = (await http.get(f"/api/threads/{thread}/runs")).json()
                if run["status"] not in ("pending", "running"):
                    break
                await asyncio.sleep(0.05)
            assert run["status"] == "interrupted", thread


async def test_disable_mcp_leaves_the_path_unserved(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url, http={"disable_mcp": True}) as served, served.client() as http:
        answer = await http.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert answer.status_code == 404
        assert (await http.get("/api/assistants/lead_agent")).status_code == 200
