"""What an MCP tool costs the Gateway's process over ``langchain-mcp-adapters`` called directly
(issue 58: at most 1 ms of host CPU more per call).

Both arms call ``lookup`` of the tests' FastMCP stdio server (``tests/mcp_servers/
mcp_fixture_server.py``) through the adapter's LangChain tool, one ``ainvoke`` per call. The
direct arm loads the tools from a session it opens itself; the host's arm gets them from
``McpServers`` (so each call goes through the host's guard: the state check and the call's
timeout scope). Only this process's CPU is counted (the server is another process). Arms
alternate in rounds; the figure is the median CPU per call of each and their difference.

    PYTHONPATH=src python benchmarks/mcp_tool_call.py [--calls 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_mcp_adapters.sessions import create_session
from langchain_mcp_adapters.tools import load_mcp_tools

from deerflow_ext.config.schema import McpConfig
from deerflow_ext.mcp_servers import McpServers

_SERVER = Path(__file__).parents[1] / "tests" / "mcp_servers" / "mcp_fixture_server.py"


async def _per_call(tool: Any, calls: int) -> float:
    start = time.process_time()
    for i in range(calls):
        await tool.ainvoke({"city": f"c{i}"})
    return (time.process_time() - start) / calls


async def run(calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        args = [str(_SERVER), "stdio", str(Path(tmp) / "pid")]
        (Path(tmp) / "extensions_config.json").write_text(
            json.dumps({"mcpServers": {"weather": {"command": sys.executable, "args": args}}})
        )
        servers = McpServers(Path(tmp) / "extensions_config.json", McpConfig())
        [hosted] = [t for t in await servers.tools() if t.name == "lookup"]
        connection = {"transport": "stdio", "command": sys.executable, "args": [*args[:2], str(Path(tmp) / "pid2")]}
        async with create_session(connection) as session:  # type: ignore[arg-type]
            await session.initialize()
            [direct] = [t for t in await load_mcp_tools(session) if t.name == "lookup"]
            await _per_call(direct, 20)
            await _per_call(hosted, 20)
            arms: dict[str, list[float]] = {"direct": [], "host": []}
            for _ in range(rounds):
                arms["direct"].append(await _per_call(direct, calls))
                arms["host"].append(await _per_call(hosted, calls))
        await servers.aclose()
    direct_ms = statistics.median(arms["direct"]) * 1000
    host_ms = statistics.median(arms["host"]) * 1000
    print(f"CPU per call, median of {rounds} rounds of {calls}: direct {direct_ms:.3f} ms, host {host_ms:.3f} ms")
    print(f"host - direct: {host_ms - direct_ms:+.3f} ms (target <= +1 ms); host / direct: {host_ms / direct_ms:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(run(options.calls, options.rounds))


if __name__ == "__main__":
    main()
