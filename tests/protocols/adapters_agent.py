"""Run in a process of its own by ``test_mcp.py``: a LangChain agent whose tools are the
Gateway's MCP tools, loaded by ``langchain-mcp-adapters``.

The agent runs twice, on the same tools: with the embedded model, which calls a tool when
told ``use <tool> <json>`` and then answers quoting the result; then with a real ``ChatOpenAI``
against the OpenAI-compatible base URL given as the third argument (the test's loopback
provider decides the tool call).

Prints one JSON line: the tools' names and, per model, the tool results the agent saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI

from deerflow_ext.agents.embedded_model import EmbeddedChatModel


async def _tool_results(model: Any, tools: list[Any], prompt: str) -> list[str]:
    state = await create_agent(model, tools=tools).ainvoke({"messages": [{"role": "user", "content": prompt}]})
    return [m.text for m in state["messages"] if m.type == "tool"]


async def main(url: str, question: str, openai_base_url: str) -> None:
    client = MultiServerMCPClient({"gateway": {"url": url, "transport": "streamable_http"}})
    tools = await client.get_tools()
    arguments = json.dumps({"messages": [{"role": "user", "content": question}]})
    embedded = await _tool_results(EmbeddedChatModel(), tools, f"use lead_agent {arguments}")
    chat_openai = ChatOpenAI(model="gpt-x", api_key="k", base_url=openai_base_url)  # type: ignore[arg-type]
    real = await _tool_results(chat_openai, tools, question)
    print(json.dumps({"tools": [t.name for t in tools], "embedded": embedded, "chat_openai": real}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
