"""What a plugin model tool costs over a plain LangChain tool of the same body (issue 55).

Both tools answer ``{"hits": [...]}`` from an ``async def`` body and are dispatched the way the
agent dispatches them, through LangGraph's ``ToolNode`` in a compiled graph, one tool call per
invocation. The plugin tool adds what the host does per call: the JSON-size check of the input,
the JSON Schema validation, the ``ToolContext``, the 30 s timeout scope and the JSON encoding of
the result with its size check. Arms alternate in rounds; the figure is the median process CPU
per call and the difference between the arms (target: at most 1 ms of host CPU more).

    PYTHONPATH=src python benchmarks/plugin_tool.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from deerflow_ext.extensions.composition.plugin_tools import build_plugin_tools
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_extension_api import ModelTool, PluginContribution

SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
    "required": ["query"],
    "additionalProperties": False,
}
ARGS = {"query": "quarterly report", "limit": 5}


async def body(query: str, limit: int) -> dict[str, Any]:
    return {"hits": [f"{query}:{i}" for i in range(limit)]}


async def plugin_handler(payload: Mapping[str, Any], context: Any) -> dict[str, Any]:
    return await body(payload["query"], payload.get("limit", 3))


async def plain_tool(query: str, limit: int = 3) -> str:
    return json.dumps(await body(query, limit), ensure_ascii=False)


def graph_of(tool: Any) -> Any:
    graph = StateGraph(MessagesState, context_schema=dict)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def tools() -> dict[str, Any]:
    registry = HostRegistry()
    registry.begin(0, "bench", "bench:install")
    registry.plugin(
        PluginContribution(
            "bench.notes", "Notes", enabled=True, tools=(ModelTool("search", "Search.", SCHEMA, plugin_handler),)
        )
    )
    registry.end()
    (plugin,) = build_plugin_tools(registry.freeze().plugins)
    plain = StructuredTool.from_function(coroutine=plain_tool, name="search", description="Search.")
    return {"plain": plain, "plugin": plugin}


async def cpu_per_call(graph: Any, name: str, calls: int) -> float:
    message = AIMessage("", tool_calls=[{"name": name, "args": ARGS, "id": "call-1"}])
    state = {"messages": [message]}
    context = {"thread_id": "bench"}
    started = time.process_time()
    for _ in range(calls):
        result = await graph.ainvoke(state, context=context)
    spent = time.process_time() - started
    assert result["messages"][-1].status == "success", result["messages"][-1]
    return spent / calls


async def main(calls: int, rounds: int) -> None:
    arms = {name: (graph_of(tool), tool.name) for name, tool in tools().items()}
    for graph, name in arms.values():
        await cpu_per_call(graph, name, 50)  # warm up
    samples: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for arm, (graph, name) in arms.items():
            samples[arm].append(await cpu_per_call(graph, name, calls))
    plain, plugin = (statistics.median(samples[arm]) * 1000 for arm in ("plain", "plugin"))
    print(f"calls per round: {calls}, rounds: {rounds}")
    print(f"plain LangChain tool: {plain:.3f} ms CPU per call (median)")
    print(f"plugin tool:          {plugin:.3f} ms CPU per call (median)")
    print(f"difference:           {plugin - plain:+.3f} ms per call (target <= +1 ms); ratio {plugin / plain:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.rounds))
