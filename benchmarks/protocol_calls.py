"""What an MCP ``tools/call`` costs the Gateway next to a ``runs.wait`` of the same input.

Run: ``PYTHONPATH=src python benchmarks/protocol_calls.py [--calls N] [--rounds R]``. Not a
test: it prints per-call figures of both arms, measured alternately against one server.

The server is ``deerflow-ext serve`` as ``peer_langgraph.py`` starts it (SQLite, title and
memory off, the embedded model). Each round makes ``--calls`` sequential stateless calls of
one arm: ``POST /api/runs/wait`` with one user message, or ``tools/call`` of the
``lead_agent`` tool with the same message over one MCP session (official client, stateless
JSON). The figure is the serve process's CPU seconds per call (``/proc/<pid>/task/*/stat``,
every thread), read around the round; client-side cost is not counted, since the clients
are different programs. The first round of each arm is a warm-up (the MCP SDK is imported
by the first MCP request). Issue 59's guard: MCP <= 1.2x ``runs.wait``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

import httpx
from cpu_per_run import process_cpu  # the sibling script
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from peer_langgraph import Server, start_ours

_MESSAGE = {"role": "user", "content": "hello there"}


def _cpu(server: Server) -> float:
    loop, others = process_cpu(server.proc.pid)
    return loop + others


async def _wait_round(server: Server, calls: int) -> float:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        before = _cpu(server)
        for _ in range(calls):
            answer = await http.post(
                "/runs/wait", json={"assistant_id": "lead_agent", "input": {"messages": [_MESSAGE]}}
            )
            answer.raise_for_status()
        return (_cpu(server) - before) / calls


async def _mcp_round(server: Server, calls: int) -> float:
    async with (
        httpx.AsyncClient(timeout=60) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        before = _cpu(server)
        for _ in range(calls):
            result = await session.call_tool("lead_agent", {"messages": [_MESSAGE]})
            assert not result.isError, result
        return (_cpu(server) - before) / calls


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_ours(
            Path(tmp), "gateway", defaults=False, io=False, database_url=None, workers=1, python=args.python
        )
        try:
            figures: dict[str, list[float]] = {"runs.wait": [], "mcp tools/call": []}
            for round_ in range(args.rounds + 1):
                for name, arm in (("runs.wait", _wait_round), ("mcp tools/call", _mcp_round)):
                    seconds = await arm(server, args.calls)
                    if round_:  # round 0 warms both arms up
                        figures[name].append(seconds)
        finally:
            server.stop()
    wait = statistics.median(figures["runs.wait"])
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"{name:16} {median * 1000:7.2f} ms CPU/call (best {min(values) * 1000:.2f}) {median / wait:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default="python")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
