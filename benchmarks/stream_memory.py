"""What one open streaming conversation costs the Gateway in memory, and where it goes.

Run: ``PYTHONPATH=src python benchmarks/stream_memory.py [--n 64] [--hold-after 100] [--on] [--trace]``.
Not a test: prints figures.

``streaming.py`` reads RSS from outside while replies flow, so its figure mixes what an open
stream holds with garbage not yet collected and memory a finished reply left in the
allocator. Here the streams stand still: the provider (``stream_provider.py --hold-after``)
stops every conversation reply after K tokens until it is told to go on, so the server holds
N open streams mid-reply, then 2N, and nothing moves between the readings.

The Gateway runs in this process (``create_app`` under uvicorn, as ``deerflow-ext serve``
builds it, startup heap frozen), the provider and the clients (``langgraph_sdk``
``runs.stream``, ``messages-tuple``, one turn per thread) in two child processes, so that
``tracemalloc`` here sees the server's allocations only. Readings at 0, N and 2N open
streams (then after release, with N x 2 ended streams kept for resume): RSS, and with
``--trace`` a ``tracemalloc`` snapshot (its tables swell RSS and it slows the server ~30x:
read RSS from a run without it). Per open stream: RSS growth N -> 2N divided by N
(the first N pay for pools and first-time caches); the snapshot diff grouped by the package
that allocated, by file and by traceback, and the growth of live container objects by type
(``gc``). After the streams end: what they left, and how much of the RSS is memory the
allocators hold free (pymalloc's arenas in use; what glibc's ``malloc_trim`` hands back).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTION = "conversation {index}: tell me more"


# ---------------------------------------------------------------------------- the clients


async def _client(url: str, provider: str, hold_after: int) -> None:
    """The client process: commands on stdin (``open N``, ``release``), one answer line each."""
    import httpx
    from streaming_checks import sdk_client

    client = sdk_client(url)
    reached: dict[int, asyncio.Event] = {}
    ended: list[asyncio.Task[None]] = []
    errors: list[str] = []

    async def stream(index: int) -> None:
        try:
            thread = await client.threads.create()
            body = {"messages": [{"role": "user", "content": QUESTION.format(index=index)}]}
            tokens = 0
            parts = client.runs.stream(thread["thread_id"], "lead_agent", input=body, stream_mode="messages-tuple")
            async for part in parts:
                if part.event.startswith("messages") and isinstance(part.data, list) and part.data:
                    content = part.data[0].get("content")
                    if isinstance(content, str) and content:
                        tokens += len(content.split())
                        if tokens >= hold_after:
                            reached[index].set()
                elif part.event == "error":
                    raise RuntimeError(f"error event: {part.data!r:.200}")
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            reached[index].set()

    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient() as plain:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command, *rest = line.split()
            if command == "open":
                first = len(reached)
                for index in range(first, first + int(rest[0])):
                    reached[index] = asyncio.Event()
                    ended.append(asyncio.create_task(stream(index)))
                await asyncio.gather(*(reached[i].wait() for i in range(first, len(reached))))
            elif command == "release":
                await plain.get(f"{provider}/release")
                await asyncio.gather(*ended)
                ended.clear()
            print(json.dumps({"errors": errors, "open": sum(not task.done() for task in ended)}), flush=True)
            errors = []
    await client.http.client.aclose()


# ---------------------------------------------------------------------------- the server


def _rss_kib() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _types() -> collections.Counter[str]:
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


class Reading:
    """The server's memory at one moment: RSS before and after a full collection, pymalloc's
    arenas, live container objects by type and, tracing, a ``tracemalloc`` snapshot."""

    def __init__(self, label: str, streams: int, trace: bool) -> None:
        self.label = label
        self.streams = streams
        self.rss_before_gc = _rss_kib()
        gc.collect()
        self.rss = _rss_kib()
        self.arenas = _arenas()
        self.types = _types()
        self.snapshot = tracemalloc.take_snapshot() if trace else None
        self.traced = tracemalloc.get_traced_memory()[0] if trace else 0


def _filtered(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snapshot.filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    )


def _short(filename: str) -> str:
    for marker in ("site-packages/", "src/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def _where(trace: tracemalloc.Traceback, frames: int) -> str:
    return " <- ".join(f"{_short(f.filename)}:{f.lineno}" for f in list(reversed(trace))[:frames])


_GENERIC = ("pydantic", "pydantic_core", "typing_extensions", "<frozen", "<unknown>")


def _owner(trace: tracemalloc.Traceback) -> str:
    """The package (ours: the module) of the innermost frame that is not the standard library
    or pydantic: whose code asked for the memory."""
    for frame in reversed(trace):  # innermost first
        name = frame.filename
        if "site-packages/" in name:
            package = name.split("site-packages/", 1)[1].split("/", 1)[0]
            if not package.startswith(_GENERIC):
                return package
        elif "/deerflow_ext/" in name:
            return "deerflow_ext/" + name.split("/deerflow_ext/", 1)[1]
        elif "/benchmarks/" in name:
            return "benchmarks"
    return "stdlib"


def report(a: Reading, b: Reading, top: int, frames: int) -> None:
    n = b.streams - a.streams
    print(f"\n{a.label} -> {b.label}: {n} streams")
    before_gc = (b.rss_before_gc - a.rss_before_gc) / n
    print(f"  RSS {(b.rss - a.rss) / n:.1f} KiB/stream after gc.collect, {before_gc:.1f} before")
    grown = [(t, (b.types[t] - a.types[t]) / n) for t in b.types | a.types]
    grown.sort(key=lambda item: -abs(item[1]))
    print("  live containers per stream: " + ", ".join(f"{t} {c:+.1f}" for t, c in grown[:top] if c))
    if a.snapshot is None or b.snapshot is None:
        return
    print(f"  traced {(b.traced - a.traced) / n / 1024:.1f} KiB/stream")
    before, after = _filtered(a.snapshot), _filtered(b.snapshot)
    owners: collections.Counter[str] = collections.Counter()
    for stat in after.compare_to(before, "traceback"):
        owners[_owner(stat.traceback)] += stat.size_diff
    print("  by the package that allocated (innermost frame outside the standard library and pydantic):")
    for owner, size in owners.most_common(top):
        print(f"    {size / n / 1024:8.2f} KiB  {owner}")
    for key in ("filename", "traceback"):
        stats = after.compare_to(before, key)
        stats.sort(key=lambda s: -s.size_diff)
        print(f"  by {key}:")
        for stat in stats[:top]:
            where = _where(stat.traceback, frames if key == "traceback" else 1)
            print(f"    {stat.size_diff / n / 1024:8.2f} KiB {stat.count_diff / n:7.1f} blocks  {where}")


def _arenas() -> int:
    """pymalloc's arenas in use (1 MiB each on 3.10+), from its own statistics (written to fd 2)."""
    with tempfile.TemporaryFile("w+") as out:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        rows = [row for row in out.read().splitlines() if row.startswith("# arenas allocated current")]
    return int(rows[0].split("=")[-1].strip().replace(",", "")) if rows else -1


def _free_but_held(before: Reading, after: Reading) -> None:
    """How much of the ended streams' RSS is memory the allocators hold free: glibc's heap
    (``malloc_trim`` hands it back) and pymalloc's arenas (freed only when wholly empty)."""
    import ctypes

    n = after.streams
    arenas = _arenas()
    print(f"  pymalloc arenas in use: {before.arenas} before, {arenas} now")
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    trimmed = _rss_kib()
    held = (after.rss - trimmed) / n
    print(f"  after malloc_trim(0): RSS {(trimmed - before.rss) / n:.1f} KiB/stream ({held:.1f} held free by glibc)")


async def _ask(proc: asyncio.subprocess.Process, command: str) -> int:
    """Send ``command`` to the client process; returns how many of its streams are open."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{command}\n".encode())
    await proc.stdin.drain()
    answer = json.loads(await proc.stdout.readline() or b'{"errors": ["the client process ended"]}')
    if answer["errors"]:
        raise SystemExit(f"stream_memory: {command}: {answer['errors'][0]}")
    return int(answer["open"])


async def serve(args: argparse.Namespace, home: Path, provider_url: str) -> None:
    import uvicorn

    from deerflow_ext.config.settings import load_settings
    from deerflow_ext.gateway import GatewayOptions, create_app
    from deerflow_ext.gateway.serve import uvicorn_options
    from deerflow_ext.logs import configure_logging
    from deerflow_ext.preflight import bind_listener, load_startup_config

    settings = load_settings(port=0)
    log_config = configure_logging("WARNING", settings.log_format)
    config = load_startup_config(settings)
    sock = bind_listener(settings.host, 0)
    app = create_app(settings, config=config, options=GatewayOptions(freeze_startup_heap=True))
    server = uvicorn.Server(uvicorn.Config(app, log_config=log_config, **uvicorn_options(settings)))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110  (uvicorn exposes no event for it)
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    command = [sys.executable, __file__, "--client", url, "--provider", provider_url, "--hold-after"]
    clients = await asyncio.create_subprocess_exec(
        *command, str(args.hold_after), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        await _ask(clients, "open 4")  # imports, first compilation, pools, the provider client
        await _ask(clients, "release")
        await asyncio.sleep(0.5)
        if args.trace:
            tracemalloc.start(args.frames)
        readings = [Reading("0 open", 0, args.trace)]
        for step in (1, 2):
            started = time.perf_counter()
            await _ask(clients, f"open {args.n}")
            await asyncio.sleep(0.5)  # the last token's publishing settles
            readings.append(Reading(f"{step * args.n} open", step * args.n, args.trace))
            still = await _ask(clients, "status")
            print(f"{step * args.n} streams opened in {time.perf_counter() - started:.1f} s; {still} open", flush=True)
            if still != step * args.n:
                raise SystemExit("stream_memory: a held stream ended before its reading")
        await _ask(clients, "release")
        await asyncio.sleep(0.5)
        readings.append(Reading(f"{2 * args.n} ended (kept for resume)", 2 * args.n, args.trace))
        print(f"RSS per open stream 0 -> N: {(readings[1].rss - readings[0].rss) / args.n:.1f} KiB")
        print(f"RSS per open stream N -> 2N: {(readings[2].rss - readings[1].rss) / args.n:.1f} KiB")
        report(readings[1], readings[2], args.top, args.frames)
        report(readings[0], readings[3], args.top, args.frames)
        _free_but_held(readings[0], readings[3])
    finally:
        if clients.returncode is None:
            clients.kill()
        await clients.wait()
        server.should_exit = True
        await serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="streams opened per step (N, then 2N)")
    parser.add_argument("--hold-after", type=int, default=100, help="tokens of each reply before it is held")
    parser.add_argument("--on", action="store_true", help="title and memory on (default off)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc snapshots (slows the server)")
    parser.add_argument("--frames", type=int, default=8, help="traceback frames kept and shown")
    parser.add_argument("--top", type=int, default=15, help="rows per table")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--provider", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(_client(args.client, args.provider, args.hold_after))
        return

    from peer_langgraph import _free_port, _load, _wait_ready
    from streaming import model_lines

    print(f"python {sys.version.split()[0]}; load {_load()}; N {args.n}; held after {args.hold_after} tokens")
    with tempfile.TemporaryDirectory(prefix="dfx-stream-memory-") as name:
        home = Path(name)
        port = _free_port()
        command = [sys.executable, str(HERE / "stream_provider.py"), "--port", str(port)]
        command += ["--hold-after", str(args.hold_after)]
        provider = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=(home / "provider.log").open("wb"))
        provider_url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(provider, f"{provider_url}/", home / "provider.log", 30)
            lines = model_lines(f"{provider_url}/v1")
            if not args.on:
                lines += ["title:", "  enabled: false", "memory:", "  enabled: false"]
            (home / "config.yaml").write_text("\n".join(lines) + "\n")
            for key in [k for k in os.environ if k.startswith("DEERFLOW_")]:
                del os.environ[key]
            os.environ.update(
                DEERFLOW_CONFIG=str(home / "config.yaml"),
                DEERFLOW_DATABASE_URL=f"sqlite+aiosqlite:///{home / 'gw.db'}",
                DEERFLOW_LOG_LEVEL="WARNING",
                OPENAI_API_KEY="bench",
            )
            asyncio.run(serve(args, home, provider_url))
        finally:
            provider.terminate()
            provider.wait(10)
    print(f"load at the end {_load()}")


if __name__ == "__main__":
    main()
