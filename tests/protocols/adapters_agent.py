"""Run in a process of its own by ``test_mcp.py``: a LangChain agent whose tools are the
Gateway's MCP tools, loaded by ``langchain-mcp-adapters``. Its model is the embedded one,
which calls a tool when told ``use <tool> <json>`` and then answers quoting the result.

Prints one JSON line: the tools' names and the agent's final answer.
"""

from __future__ import annotations

import asyncio
import json
import sys

from langchain.agents import create_agent
from langchain_mcp_adapters.client import MultiServerMCPClient

from deerflow_ext.agents.embedded_model import EmbeddedChatModel


async def main(url: str, question: str) -> None:
    client = MultiServerMCPClient({"gateway": {"url": url, "transport": "streamable_http"}})
    tools = await client.get_tools()
    agent = create_agent(EmbeddedChatModel(), tools=tools)
    arguments = json.dumps({"messages": [{"role": "user", "content": question}]})
    state = await agent.ainvoke({"messages": [{"role": "user", "content": f"use lead_agent {arguments}"}]})
    tool_results = [m.text for m in state["messages"] if m.type == "tool"]
    print(json.dumps({"tools": [t.name for t in tools], "tool_results": tool_results}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
