"""Concurrent streaming conversations through a real provider client, ours against LangGraph's server.

Run: ``PYTHONPATH=src python benchmarks/streaming.py [--n 16 64] [--rounds 1] [--verify]``.
Not a test: prints figures and the ratios of arms measured alternately in one run.

What users run is not a trivial run on an offline model: it is a model streaming tokens for
seconds while the client watches them arrive. Here every reply comes from a local
OpenAI-compatible server (``stream_provider.py``: 200 tokens 20 ms apart, ``usage`` at the
end, a tool call on the first turn of every third conversation), read by the real provider
client, ``langchain_openai.ChatOpenAI(streaming=True)``, in both servers:

- ``ours:on``: ``deerflow-ext serve`` with the model as a ``models:`` entry of config.yaml,
  title and memory on (the defaults, as users run it; their calls go to the same provider,
  which answers a request without tools with a short title or a JSON list of facts);
- ``ours:off``: the same with title and memory off;
- ``peer``: ``langgraph dev`` (installed as ``peer_langgraph.py`` says) serving a LangChain
  v1 ``create_agent`` graph on the same model and a calculator tool, ``--n-jobs-per-worker``
  the largest N so its queue is not the limit.

Clients: N conversations at once, each a thread and 3 turns of ``langgraph_sdk``'s async
``runs.stream(..., stream_mode="messages-tuple")``; the arrival time of every AI content
token is kept. Per server and N: time to first token (p50/p99, from the request), the gap
between two tokens of a reply (p50/p99, a chunk carrying k tokens counts one gap and k-1
zeros), completed turns (the reply's 200 tokens all received) and errors; CPU seconds of
the server's processes (``/proc``) per 1,000 streamed tokens; RSS (sampled every 100 ms,
less the level before the round) per open stream, the peak while the N first turns stream
and before any has ended, and per conversation over the whole round, which adds the ended
streams a server keeps for resume (ours: ``DEERFLOW_STREAM_RETAIN_SECONDS``, 600 s). Memory
an earlier round freed and this one reuses is not growth: later rounds can read lower. **Capacity** is the
largest N whose p99 gap stays under 100 ms with no error. The servers run on ``--pin``
(default CPU 0), the provider and these clients on the others; arms alternate within each
round; ratios ours/peer are of the medians with the range of the per-round ratios.

``--verify`` checks our arms after each N: every thread's messages are in our database
(``threads.get_state``: each turn's question and the full reply, the tool's answer on a
tool turn) and every run's stream is resumable (``join_stream`` with ``Last-Event-ID`` set
to an event half-way replays exactly the events after it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_sdk.client import LangGraphClient
from peer_langgraph import (
    INSTALL_HINT,
    Server,
    _load,
    _on_cpus,
    _peer_path,
    _wait_ready,
    parse_cpus,
    pin_clients,
    placement,
    start_ours,
    start_peer,
)
from stream_provider import REPLY_TOKENS, TOOL_PROMPT
from streaming_checks import Conversation, Turn, sdk_client, verify_conversations

from gateway import _free_port, _pct

HERE = Path(__file__).resolve().parent
TURNS = 3
GAP_LIMIT = 0.100
"""The p99 inter-token gap under which a server is said to keep up at N conversations."""
TOOL_EVERY = 3

PEER_GRAPH = textwrap.dedent(
    '''
    """A create_agent graph on ChatOpenAI against the benchmark's provider, with a calculator."""
    import ast
    import operator
    import os

    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    _OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


    def _value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](_value(node.left), _value(node.right))
        raise ValueError("not arithmetic")


    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression such as 6*7."""
        return str(_value(ast.parse(expression, mode="eval").body))


    model = ChatOpenAI(
        model="bench", base_url=os.environ["BENCH_PROVIDER_URL"], api_key="bench",
        streaming=True, stream_usage=True, max_retries=0,
    )
    graph = create_agent(model, tools=[calculator], system_prompt="You are a helpful assistant.")
    '''
)


@dataclass
class Round:
    """One arm's figures at one N in one round."""

    conversations: list[Conversation]
    cpu_seconds: float
    rss_open_kib: int
    """RSS growth while the N first turns stream, before any ends: what open streams hold."""
    rss_round_kib: int
    """RSS growth over the round: open streams, and ended ones kept for resume."""

    @property
    def tokens(self) -> int:
        return sum(t.tokens for c in self.conversations for t in c.turns)

    def ttfts(self) -> list[float]:
        return [t.arrivals[0][0] - t.start for c in self.conversations for t in c.turns if t.arrivals]

    def gaps(self) -> list[float]:
        gaps: list[float] = []
        for c in self.conversations:
            for t in c.turns:
                for (before, _), (now, k) in zip(t.arrivals, t.arrivals[1:], strict=False):
                    gaps.append(now - before)
                    gaps.extend([0.0] * (k - 1))
        return gaps

    def completed(self) -> int:
        return sum(1 for c in self.conversations for t in c.turns if t.tokens == REPLY_TOKENS)

    def errors(self) -> list[str]:
        return [c.error for c in self.conversations if c.error]


def question(index: int, turn: int) -> str:
    ask = TOOL_PROMPT + " for 6*7" if index % TOOL_EVERY == TOOL_EVERY - 1 and turn == 0 else "tell me more"
    return f"conversation {index}, turn {turn + 1}: {ask}"


async def converse(client: LangGraphClient, server: Server, conversation: Conversation, turns: int) -> None:
    try:
        thread = await client.threads.create()
        conversation.thread_id = thread["thread_id"]
        for n in range(turns):
            turn = Turn(conversation.thread_id, None, question(conversation.index, n), time.perf_counter())
            conversation.turns.append(turn)
            conversation.tool_turns += TOOL_PROMPT in turn.question
            body = {"messages": [{"role": "user", "content": turn.question}]}
            stream = client.runs.stream(turn.thread_id, server.assistant, input=body, stream_mode="messages-tuple")
            async for part in stream:
                now = time.perf_counter()
                if part.id is not None:
                    turn.event_ids.append(part.id)
                if part.event == "metadata":
                    turn.run_id = part.data.get("run_id")
                elif part.event == "error":
                    raise RuntimeError(f"error event: {part.data!r:.200}")
                elif part.event.startswith("messages"):
                    chunk: dict[str, Any] = part.data[0] if isinstance(part.data, list) and part.data else {}
                    content = chunk.get("content") if chunk.get("type", "").startswith(("AIMessage", "ai")) else None
                    if isinstance(content, str) and content:
                        turn.arrivals.append((now, len(content.split())))
                        turn.text += content
            turn.end = time.perf_counter()
            if turn.tokens != REPLY_TOKENS:
                raise RuntimeError(f"turn {n + 1} ended after {turn.tokens} of {REPLY_TOKENS} tokens")
    except Exception as exc:  # counted, not raised: errors are one of the figures
        conversation.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``langgraph dev`` may run its server in a child)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(parents.get(found[-1], []))
    return found


def _cpu_seconds(pids: list[int]) -> float:
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), 0)
    return total


async def one_round(server: Server, n: int, turns: int = TURNS) -> Round:
    pids = _tree(server.proc.pid)
    client = sdk_client(server.url)
    conversations = [Conversation(i) for i in range(n)]
    base_rss = _rss_kib(pids)
    samples: list[tuple[float, int]] = []
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), _rss_kib(pids)))
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    cpu = _cpu_seconds(pids)
    try:
        await asyncio.gather(*(converse(client, server, c, turns) for c in conversations))
        cpu = _cpu_seconds(pids) - cpu
    finally:
        done.set()
        await sampler
        await client.http.client.aclose()
    first_end = min((t.end for c in conversations for t in c.turns if t.end), default=float("inf"))
    open_peak = max((rss for at, rss in samples if at < first_end), default=base_rss)
    round_peak = max((rss for _, rss in samples), default=base_rss)
    return Round(conversations, cpu, max(0, open_peak - base_rss), max(0, round_peak - base_rss))


def _ms(values: list[float], q: float) -> str:
    return f"{_pct(values, q) * 1e3:.0f}" if values else "-"


def _ratio(mine: list[float], theirs: list[float]) -> str:
    if not mine or not theirs or min(theirs) <= 0:
        return "-"
    paired = [a / b for a, b in zip(mine, theirs, strict=True)]
    return f"{statistics.median(mine) / statistics.median(theirs):.2f}x ({min(paired):.2f}-{max(paired):.2f})"


def report(n: int, servers: list[Server], rounds: dict[str, list[Round]]) -> dict[str, float]:
    """Print one N's lines; return each server's p99 gap (inf on any error or lost turn)."""
    peer = rounds.get("peer")
    p99s: dict[str, float] = {}
    for server in servers:
        mine = rounds[server.name]
        gaps = [g for r in mine for g in r.gaps()]
        ttfts = [t for r in mine for t in r.ttfts()]
        errors = [e for r in mine for e in r.errors()]
        done, expected = sum(r.completed() for r in mine), len(mine) * n * TURNS
        cpu = [r.cpu_seconds / r.tokens * 1000 if r.tokens else float("nan") for r in mine]
        rss_open = [r.rss_open_kib / n for r in mine]
        rss_round = [r.rss_round_kib / n for r in mine]
        line = (
            f"{n:>5} {server.name:<9}{_ms(ttfts, 0.5):>7}{_ms(ttfts, 0.99):>7}{_ms(gaps, 0.5):>6}{_ms(gaps, 0.99):>6}"
            f"{done:>6}/{expected:<6}{len(errors):>4}{statistics.median(cpu):>8.3f}"
            f"{statistics.median(rss_open):>8.1f}{statistics.median(rss_round):>8.1f}"
        )
        if peer is not None and server.name != "peer":
            peer_cpu = [r.cpu_seconds / max(1, r.tokens) * 1000 for r in peer]
            line += f"   cpu/peer {_ratio(cpu, peer_cpu)}"
        print(line, flush=True)
        if errors:
            print(f"      first error of {server.name}: {errors[0]}", flush=True)
        complete = not errors and done == expected
        p99s[server.name] = _pct(gaps, 0.99) if gaps and complete else float("inf")
    per_round = "; ".join(
        f"{s.name} cpu/1k " + "/".join(f"{r.cpu_seconds / max(1, r.tokens) * 1000:.3f}" for r in rounds[s.name])
        for s in servers
    )
    print(f"      per round: {per_round}; load {_load()}", flush=True)
    return p99s


def start_provider(port: int, cpus: frozenset[int] | None, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(HERE / "stream_provider.py"), "--port", str(port)]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=log.open("wb"), preexec_fn=_on_cpus(cpus), cwd=HERE
    )
    _wait_ready(proc, f"http://127.0.0.1:{port}/", log, 30)
    return proc


def model_lines(provider_url: str) -> list[str]:
    return [
        "models:",
        "  - name: bench",
        "    use: langchain_openai:ChatOpenAI",
        "    model: bench",
        f"    base_url: {provider_url}",
        "    api_key: bench",
        "    streaming: true",
        "    stream_usage: true",
    ]


async def run(args: argparse.Namespace, servers: list[Server]) -> None:
    for server in servers:
        warm = await one_round(server, 4, 1)  # imports, first compilation, pools, the provider client
        if warm.errors():
            raise SystemExit(f"streaming: {server.name} failed its warm-up: {warm.errors()[0]}")
    print(
        f"{'N':>5} {'server':<9}{'ttft50':>7}{'ttft99':>7}{'gap50':>6}{'gap99':>6}{'done':>13}{'err':>4}"
        f"{'cpu/1k':>8}{'KiB/st':>8}{'KiB/cv':>8}   (ms; CPU s per 1,000 tokens; RSS growth in KiB per open"
        " stream, first turns, and per conversation over the round, ended streams kept for resume included)"
    )
    capacity: dict[str, int] = {s.name: 0 for s in servers}
    for n in args.n:
        rounds: dict[str, list[Round]] = {s.name: [] for s in servers}
        for index in range(args.rounds):
            for server in servers if index % 2 == 0 else list(reversed(servers)):
                rounds[server.name].append(await one_round(server, n))
        for name, p99 in report(n, servers, rounds).items():
            if p99 < GAP_LIMIT:
                capacity[name] = max(capacity[name], n)
        if args.verify:
            for server in servers:
                if server.name != "peer":
                    conversations = [c for r in rounds[server.name] for c in r.conversations]
                    print(f"      verify {server.name}: {await verify_conversations(server.url, conversations)}")
    largest = max(args.n)
    line = ", ".join(f"{name} {n}{'+' if n == largest else ''}" for name, n in capacity.items())
    print(f"capacity (largest N with p99 gap < {GAP_LIMIT * 1e3:.0f} ms, no error; + = the largest measured): {line}")
    if "peer" in capacity:
        for name, n in capacity.items():
            if name != "peer":
                ratio = f"{n / capacity['peer']:.2f}x" if capacity["peer"] else "peer kept up at no N"
                print(f"  {name}/peer capacity: {ratio}")
    print(f"load at the end {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[16, 64, 256, 512], help="concurrent conversations")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per N")
    parser.add_argument("--pin", type=parse_cpus, default=parse_cpus("0"), help="the servers' CPUs (default 0)")
    parser.add_argument("--peer", help="the peer's langgraph command (as peer_langgraph.py)")
    parser.add_argument("--no-peer", action="store_true", help="measure our arms only")
    parser.add_argument("--arms", nargs="+", default=["ours:on", "ours:off"], choices=["ours:on", "ours:off"])
    parser.add_argument("--database-url", help="our database (default: SQLite in a temp dir)")
    parser.add_argument("--workers", type=int, default=1, help="deerflow-ext serve --workers")
    parser.add_argument("--redis-url", help="our DEERFLOW_REDIS_URL (streams shared by the workers)")
    parser.add_argument("--verify", action="store_true", help="check our database and resumable streams after each N")
    args = parser.parse_args()

    langgraph = None if args.no_peer else _peer_path(args.peer)
    if not args.no_peer and langgraph is None:
        raise SystemExit(f"streaming: {INSTALL_HINT} (or --no-peer)")
    print(
        f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; load {_load()}; N {args.n} x {TURNS} turns, "
        f"{REPLY_TOKENS} tokens a reply, {args.rounds} rounds; database {args.database_url or 'SQLite'}; workers "
        f"{args.workers}; peer {langgraph or '-'} (jobs {max(args.n)}); servers on CPUs {placement(args.pin)}"
    )
    pin_clients(args.pin)
    clients = frozenset(os.sched_getaffinity(0))
    servers: list[Server] = []
    with tempfile.TemporaryDirectory(prefix="dfx-stream-") as name:
        tmp = Path(name)
        port = _free_port()
        provider = start_provider(port, clients, tmp / "provider.log")
        url = f"http://127.0.0.1:{port}/v1"
        env = {"OPENAI_API_KEY": "bench", "BENCH_PROVIDER_URL": url}
        if args.redis_url:
            env["DEERFLOW_REDIS_URL"] = args.redis_url
        try:
            for arm in args.arms:
                servers.append(
                    start_ours(
                        tmp,
                        arm.replace(":", "-"),
                        defaults=arm == "ours:on",
                        io=False,
                        database_url=args.database_url,
                        workers=args.workers,
                        python=sys.executable,
                        cpus=args.pin,
                        config_lines=model_lines(url),
                        extra_env=env,
                    )
                )
                servers[-1].name = arm
            if langgraph is not None:
                servers.append(start_peer(tmp, langgraph, max(args.n), args.pin, graph=PEER_GRAPH, extra_env=env))
            asyncio.run(run(args, servers))
        finally:
            for server in servers:
                server.stop()
            provider.terminate()
            provider.wait(10)


if __name__ == "__main__":
    main()
