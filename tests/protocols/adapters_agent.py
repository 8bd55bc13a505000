"""Run in a process of its own by ``test_mcp.py``: a LangChain agent whose tools are the
Gateway's MCP tools, loaded by ``langchain-mcp-adapters``.

Its model is the embedded one, which calls a tool when told ``use <tool> <json>`` and then
answers quoting the result; or, given an OpenAI-compatible base URL as a third argument, a
real ``ChatOpenAI`` against it (the test's loopback provider decides the tool call).

Prints one JSON line: the tools' names and the tool results the agent saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_mcp_adapters.client import MultiServerMCPClient

from deerflow_ext.agents.embedded_model import EmbeddedChatModel


async def main(url: str, question: str, openai_base_url: str | None) -> None:
    client = MultiServerMCPClient({"gateway": {"url": url, "transport": "streamable_http"}})
    tools = await client.get_tools()
    model: Any
    if openai_base_url is None:
        model = EmbeddedChatModel()
        arguments = json.dumps({"messages": [{"role": "user", "content": question}]})
        prompt = f"use lead_agent {arguments}"
    else:
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(model="gpt-x", api_key="k", base_url=openai_base_url)  # type: ignore[arg-type]
        prompt = question
    agent = create_agent(model, tools=tools)
    state = await agent.ainvoke({"messages": [{"role": "user", "content": prompt}]})
    tool_results = [m.text for m in state["messages"] if m.type == "tool"]
    print(json.dumps({"tools": [t.name for t in tools], "tool_results": tool_results}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
