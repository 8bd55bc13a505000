"""Our Gateway against LangGraph's own server (``langgraph dev``) on the same agent shape.

Run: ``PYTHONPATH=src python benchmarks/peer_langgraph.py [--peer /work/bench/peer/bin/langgraph]``.
Not a test: prints figures and the ratios of arms measured alternately in one run.

The peer is ``langgraph dev`` (langgraph-api's in-memory runtime). It is never a dependency
of this project: install it in a virtualenv of its own, for example::

    python3 -m venv /work/bench/peer
    /work/bench/peer/bin/pip install "langgraph-cli[inmem]" langchain

and pass ``--peer /work/bench/peer/bin/langgraph`` (the default is that path, then
``langgraph`` on ``PATH``). Without it the script says so in one line and stops.

Both servers serve a LangChain v1 ``create_agent`` graph whose model is deterministic and
offline: one model call answers "hello". Ours is ``deerflow-ext serve`` (a real uvicorn, the
embedded model, SQLite in a temp directory or ``--database-url``); the peer's graph module
is written by this script into a temp directory (a ``BaseChatModel`` that answers one fixed
message, ``create_agent`` with no tools). Arms:

- ``ours``: title and memory off (the peer has neither) — the main comparison;
- ``ours+defaults``: our defaults (title and memory on);
- ``ours+io``: title and memory off, plus a lifecycle extension whose ``on_task_start``
  awaits ``--io-seconds`` (0.5 s): an I/O-bound run (``--arms ours+io`` to include it);
  ``--io-jitter J`` draws each wait uniformly from 0.5 +- J s instead (same mean): with every
  wait equal, runs that start together finish together and the loop idles while they all
  wait, which real I/O does not do;
- ``peer``: ``langgraph dev --no-reload``.

Every arm uses the same client, ``langgraph_sdk``: per run ``threads.create()`` then
``runs.wait(thread, assistant, input=...)``; the latency is the ``runs.wait`` call. At
each client count (1, 8, 32) the arms run in alternating order ``--rounds`` times and the
medians are printed with the ratios ours/peer. A round is at least :data:`WAVES` runs per
client: a round of two waves measured the peer's ramp more than its throughput (its queue
takes runs on a poll), at 32 clients 30-39 runs/s in 64-run rounds against 40-41 in rounds
of 128 and 256, while ours read ~40 either way (2026-12-03). The servers stay up for the
whole run, each warmed before the first round. ``--baseline DIR`` also starts every arm of
ours from the checkout in DIR (``base:<arm>``), alternating with the rest: how each
optimisation was measured against the tree before it.

``--pin CPUS`` runs every server on those CPUs and this script, whose coroutines are the
clients, on the others. On a 2-core machine the load generator otherwise takes turns on the
server's core: a PostgreSQL arm, whose backends want the cores as well, lost ~9% of its
event loop's time waiting to be scheduled at 32 clients where SQLite's lost ~1%.
The peer, a process of several threads, reads faster pinned as well (at 32 clients 110.8
against 93.2 runs/s, 2026-12-05). PostgreSQL's own processes stay where the operating system
puts them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gateway import _free_port, _pct  # the sibling script's helpers (benchmarks/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "peer_langgraph"  # this module, importable by the server through PYTHONPATH
DEFAULT_PEER = Path("/work/bench/peer/bin/langgraph")
PROMPT = "hello"
BASE = "base:"
WAVES = 8
"""Runs per client in a round, at least: enough waves that starting and draining are a small part."""
INSTALL_HINT = (
    "the peer is not installed: python3 -m venv /work/bench/peer && /work/bench/peer/bin/pip install "
    '"langgraph-cli[inmem]" langchain, then pass --peer /work/bench/peer/bin/langgraph'
)

PEER_GRAPH = textwrap.dedent(
    '''
    """A create_agent graph on a deterministic offline model: one call answers "hello"."""
    import uuid

    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult


    class FixedModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "fixed"

        def bind_tools(self, tools, **kwargs):
            return self

        def _reply(self, messages):
            text = "Hello! You said: " + str(messages[-1].content)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(text, id=str(uuid.uuid4())))])

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            return self._reply(messages)

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            return self._reply(messages)


    graph = create_agent(FixedModel(), tools=[], system_prompt="You are a helpful assistant.")
    '''
)


class SleepyLifecycle:
    """An I/O-bound run: ``on_task_start`` awaits (a stand-in for a network call)."""

    seconds = float(os.environ.get("PEER_BENCH_IO_SECONDS", "0.5"))
    jitter = float(os.environ.get("PEER_BENCH_IO_JITTER", "0"))

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        # With jitter, uniform in seconds +- jitter (same mean): real I/O is never this regular.
        await asyncio.sleep(self.seconds + (random.uniform(-self.jitter, self.jitter) if self.jitter else 0.0))

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        return None


def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(SleepyLifecycle())


@dataclass
class Server:
    name: str
    url: str  # the LangGraph API base for langgraph_sdk
    assistant: str
    proc: subprocess.Popen[bytes]
    log: Path
    rates: dict[int, list[float]] = field(default_factory=dict)
    latencies: dict[int, list[float]] = field(default_factory=dict)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


PIN_HELP = "run the servers on these CPUs (e.g. 0), the clients on the others"


def parse_cpus(text: str) -> frozenset[int]:
    """A CPU list as ``taskset -c`` reads it (``0``, ``0,2``, ``0-1``)."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def placement(cpus: frozenset[int] | None) -> str:
    """How a run's first line names where the servers run."""
    return ",".join(map(str, sorted(cpus))) if cpus else "any"


def pin_clients(servers: frozenset[int]) -> None:
    """Move this process (the clients) off the servers' CPUs; one line when that leaves none."""
    mine = os.sched_getaffinity(0)
    if not servers <= mine or not mine - servers:
        raise SystemExit(f"--pin {sorted(servers)}: needs a subset of this process's CPUs {sorted(mine)} leaving one")
    os.sched_setaffinity(0, mine - servers)


def _on_cpus(cpus: frozenset[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that puts a server (and the processes it starts) on ``cpus``."""
    return None if cpus is None else lambda: os.sched_setaffinity(0, cpus)


def _wait_ready(proc: subprocess.Popen[bytes], probe: str, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(probe, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"{probe} never answered; its log ({log}):\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def start_ours(
    tmp: Path,
    name: str,
    *,
    defaults: bool,
    io: bool,
    database_url: str | None,
    workers: int,
    python: str,
    tree: Path = ROOT,
    prefix: Sequence[str] = (),
    ready_timeout: float = 120,
    cpus: frozenset[int] | None = None,
    config_lines: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> Server:
    lines = list(config_lines)
    if io:
        lines += ["plugins:", "  - name: sleepy", f"    use: {EXTENSION}:install"]
    if not defaults:
        lines += ["title:", "  enabled: false", "memory:", "  enabled: false"]
    home = tmp / name
    home.mkdir()
    (home / "config.yaml").write_text("\n".join(lines) + "\n" if lines else "{}\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tree / "src"), str(Path(__file__).resolve().parent)]),
        DEERFLOW_CONFIG=str(home / "config.yaml"),
        DEERFLOW_DATABASE_URL=database_url or f"sqlite+aiosqlite:///{home / 'gw.db'}",
        DEERFLOW_LOG_LEVEL="WARNING",
    )
    env.update(extra_env or {})
    log = home / "server.log"
    command = [*prefix, python, "-m", "deerflow_ext.cli", "serve", "--port", str(port)]
    if workers > 1:
        command += ["--workers", str(workers)]
    proc = subprocess.Popen(
        command, cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"), preexec_fn=_on_cpus(cpus)
    )
    base = f"http://127.0.0.1:{port}"
    _wait_ready(proc, f"{base}/health", log, ready_timeout)
    return Server(name, f"{base}/api", "lead_agent", proc, log)


def start_peer(
    tmp: Path,
    langgraph: str,
    jobs: int,
    cpus: frozenset[int] | None = None,
    *,
    graph: str = PEER_GRAPH,
    extra_env: Mapping[str, str] | None = None,
) -> Server:
    home = tmp / "peer"
    home.mkdir()
    (home / "peer_graph.py").write_text(graph)
    (home / "langgraph.json").write_text('{"dependencies": ["."], "graphs": {"agent": "./peer_graph.py:graph"}}\n')
    port = _free_port()
    env = dict(os.environ)
    for key in ("PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(key, None)
    env.update(LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false", LANGGRAPH_CLI_NO_ANALYTICS="1")
    env.update(extra_env or {})
    log = home / "server.log"
    command = [langgraph, "dev", "--no-browser", "--no-reload", "--port", str(port), "--n-jobs-per-worker", str(jobs)]
    command += ["--server-log-level", "WARNING"]
    proc = subprocess.Popen(
        command, cwd=home, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, preexec_fn=_on_cpus(cpus)
    )
    base = f"http://127.0.0.1:{port}"
    _wait_ready(proc, f"{base}/ok", log)
    return Server("peer", base, "agent", proc, log)


async def _one(client: Any, server: Server, latencies: list[float]) -> None:
    thread = await client.threads.create()
    start = time.perf_counter()
    values = await client.runs.wait(
        thread["thread_id"], server.assistant, input={"messages": [{"role": "user", "content": PROMPT}]}
    )
    latencies.append(time.perf_counter() - start)
    messages = values.get("messages") if isinstance(values, dict) else None
    if not messages or messages[-1].get("type") != "ai":
        raise RuntimeError(f"{server.name}: the run did not end with an AI message: {values!r:.300}")


async def measure(server: Server, total: int, clients: int) -> tuple[float, list[float]]:
    """``total`` runs by ``clients`` concurrent workers on one SDK client; runs/s and latencies."""
    from langgraph_sdk import get_client

    client = get_client(url=server.url, timeout=httpx.Timeout(300.0))
    latencies: list[float] = []
    counter = iter(range(total))

    async def worker() -> None:
        for _ in counter:
            await _one(client, server, latencies)

    start = time.perf_counter()
    try:
        await asyncio.gather(*(worker() for _ in range(clients)))
    except Exception as exc:
        raise ArmFailedError(server, clients, exc) from exc
    finally:
        await client.http.client.aclose()
    wall = time.perf_counter() - start
    return total / wall, latencies


class ArmFailedError(RuntimeError):
    """A run of one arm failed: one line naming the arm, the error and the server's last log
    line (the log itself goes with the temp dir). PostgreSQL refusing connections ("too many
    clients") is the usual one: every arm's servers stay up, each with its own pools."""

    def __init__(self, server: Server, clients: int, exc: BaseException) -> None:
        lines = [line for line in server.log.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1].strip() if lines else "(empty)"
        error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        super().__init__(f"arm {server.name} failed at {clients} clients: {error}; its server's log ends: {last[:300]}")


def run_arms(script: str, measuring: Coroutine[Any, Any, None]) -> None:
    """Run a script's measurements; a failed arm ends it with that arm's one line."""
    try:
        asyncio.run(measuring)
    except ArmFailedError as exc:
        raise SystemExit(f"{script}: {exc}") from None


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(args: argparse.Namespace, servers: list[Server]) -> None:
    for server in servers:
        await measure(server, 8, 4)  # warm-up: imports, first compilation, connection pools
    peer = next((s for s in servers if s.name == "peer"), None)
    by_name = {s.name: s for s in servers}
    print(f"{'clients':>7} {'arm':<20}{'runs/s':>9}{'p50 ms':>9}{'p95 ms':>9}   ratios (runs/s (by round); p50)")
    for clients in args.clients:
        total = max(args.runs, clients * WAVES)
        for round_ in range(args.rounds):
            order = servers if round_ % 2 == 0 else list(reversed(servers))
            for server in order:
                rate, latencies = await measure(server, total, clients)
                server.rates.setdefault(clients, []).append(rate)
                server.latencies.setdefault(clients, []).extend(latencies)
        for server in servers:
            rate = statistics.median(server.rates[clients])
            lat = server.latencies[clients]
            p50, p95 = _pct(lat, 0.5) * 1e3, _pct(lat, 0.95) * 1e3
            line = f"{clients:>7} {server.name:<20}{rate:>9.1f}{p50:>9.1f}{p95:>9.1f}"
            others = [("peer", peer)] if server is not peer else []
            if not server.name.startswith(BASE):
                others.append(("base", by_name.get(BASE + server.name)))
            if "@" in server.name:  # the same arm on the default database, one process
                others.append(("sqlite", by_name.get(server.name.partition("@")[0])))
            for label, other in others:
                if other is not None and other is not server:
                    ratio = rate / statistics.median(other.rates[clients])
                    paired = _paired(server.rates[clients], other.rates[clients])
                    their_p50 = _pct(other.latencies[clients], 0.5) * 1e3
                    line += f"   /{label} {ratio:.2f}x ({paired}); {p50 / their_p50:.2f}x"
            print(line, flush=True)
        rounds = ", ".join(f"{s.name} " + "/".join(f"{r:.1f}" for r in s.rates[clients]) for s in servers)
        print(f"        per round: {rounds}; load {_load()}", flush=True)


def _paired(mine: list[float], theirs: list[float]) -> str:
    """The range of two arms' per-round runs/s ratios. Arms measured one after the other in a
    round share that round's machine load, which drifts by tens of percent between rounds on
    a shared 2-core machine: a difference every round agrees on (a range on one side of 1.00)
    means more than the ratio of the medians alone."""
    ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
    return f"{min(ratios):.2f}-{max(ratios):.2f} by round"


def _peer_path(option: str | None) -> str | None:
    if option:
        return option if Path(option).exists() or shutil.which(option) else None
    if DEFAULT_PEER.exists():
        return str(DEFAULT_PEER)
    return shutil.which("langgraph")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", help=f"the peer's langgraph command (default {DEFAULT_PEER}, then PATH)")
    parser.add_argument("--no-peer", action="store_true", help="measure our arms only")
    parser.add_argument("--peer-jobs", type=int, default=10, help="langgraph dev --n-jobs-per-worker (its default 10)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--runs", type=int, default=64, help=f"runs per arm per round (at least {WAVES}x the clients)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client count")
    arms = ["ours", "ours+defaults", "ours+io"]
    parser.add_argument("--arms", nargs="+", default=arms[:2], choices=arms, help="our servers to measure")
    parser.add_argument("--io-seconds", type=float, default=0.5, help="what the ours+io lifecycle hook awaits")
    parser.add_argument("--io-jitter", type=float, default=0.0, help="ours+io waits io-seconds +- this, uniformly")
    parser.add_argument("--database-url", help="our database (default: SQLite in a temp dir); e.g. PostgreSQL")
    parser.add_argument("--workers", type=int, default=1, help="deerflow-ext serve --workers")
    parser.add_argument("--python", default=sys.executable, help="the python that runs deerflow-ext serve")
    parser.add_argument(
        "--baseline", help="another checkout (`git archive` of the commit before) measured alternately: base:<arm>"
    )
    parser.add_argument("--pg", help="also run each arm on this PostgreSQL URL (<arm>@pg), measured alternately")
    parser.add_argument("--pg-workers", type=int, nargs="*", default=[], help="and with --workers N there (<arm>@pg*N)")
    parser.add_argument("--baseline-python", help="the python for the baseline's servers (default: --python)")
    parser.add_argument("--pin", type=parse_cpus, help=PIN_HELP)
    args = parser.parse_args()

    langgraph = None if args.no_peer else _peer_path(args.peer)
    if not args.no_peer and langgraph is None:
        raise SystemExit(f"peer_langgraph: {INSTALL_HINT} (or --no-peer)")
    os.environ["PEER_BENCH_IO_SECONDS"] = str(args.io_seconds)
    os.environ["PEER_BENCH_IO_JITTER"] = str(args.io_jitter)
    print(
        f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; load {_load()}; "
        f"max({args.runs}, {WAVES} x clients) runs x {args.rounds} rounds per arm and client count; database "
        f"{args.database_url or 'SQLite'}; workers {args.workers}; peer {langgraph or '-'} (jobs {args.peer_jobs}); "
        f"servers on CPUs {placement(args.pin)}"
    )
    if args.pin:
        pin_clients(args.pin)
    servers: list[Server] = []
    with tempfile.TemporaryDirectory(prefix="dfx-peer-") as name:
        tmp = Path(name)
        try:
            trees = [("", ROOT, args.python)]
            if args.baseline:
                trees.append((BASE, Path(args.baseline).resolve(), args.baseline_python or args.python))
            places = [("", args.database_url, args.workers)]
            if args.pg:
                places.append(("@pg", args.pg, 1))
                places += [(f"@pg*{n}", args.pg, n) for n in args.pg_workers]
            for prefix, tree, python in trees:
                for arm in args.arms:
                    for suffix, database_url, workers in places:
                        servers.append(
                            start_ours(
                                tmp,
                                prefix + arm + suffix,
                                defaults=arm == "ours+defaults",
                                io=arm == "ours+io",
                                database_url=database_url,
                                workers=workers,
                                python=python,
                                tree=tree,
                                cpus=args.pin,
                            )
                        )
            if langgraph is not None:
                servers.append(start_peer(tmp, langgraph, args.peer_jobs, args.pin))
            run_arms("peer_langgraph", run(args, servers))
        finally:
            for server in servers:
                server.stop()


if __name__ == "__main__":
    main()
