"""Both protocols with a real provider package: ``ChatOpenAI`` against the loopback
OpenAI-compatible server (``tests/fake_openai.py``, which answers ``Echo: <last user text>``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from protocol_support import gateway

from fake_openai import FakeOpenAI


async def test_an_mcp_tool_and_an_a2a_agent_answer_with_chat_openai(tmp_path: Path, database_url: str) -> None:
    with FakeOpenAI() as fake:
        model = {"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "gpt-x", "api_key": "k"}
        config = {
            "models": [{**model, "base_url": fake.base_url}],
            "title": {"enabled": False},
            "memory": {"enabled": False},
        }
        async with gateway(tmp_path, database_url, **config) as served, served.client() as http:
            async with (
                httpx.AsyncClient(timeout=60) as mcp_http,
                streamable_http_client(f"{served.base_url}/api/mcp", http_client=mcp_http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("lead_agent", {"messages": [{"role": "user", "content": "tea?"}]})
            assert not result.isError
            assert [part.text for part in result.content] == ["Echo: tea?"]

            resolver = A2ACardResolver(
                http, f"{served.base_url}/api", agent_card_path=".well-known/agent-card.json?assistant_id=lead_agent"
            )
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(
                await resolver.get_agent_card()
            )
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="coffee?")])
            [sent] = [event async for event in client.send_message(SendMessageRequest(message=message))]
            assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED
            assert sent.task.artifacts[0].parts[0].text == "Echo: coffee?"
        assert len(fake.completions()) == 2
