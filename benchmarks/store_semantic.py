"""How long a semantic store search takes over 10,000 items, and whether the event loop
stalls meanwhile: ``ItemStore`` with ``store.index`` on SQLite (sqlite-vec), or PostgreSQL.

Run: ``PYTHONPATH=src python benchmarks/store_semantic.py [--items 10000] [--dims 384]
[--searches 50] [--postgres URL]``. Not a test. Items are put in batches (one model call
and one transaction per batch) with feature-hashed word vectors (deterministic, no model
download: the figure is the store's, not a model's), then ``--searches`` searches run one
after another, each with a query over the whole namespace (half with a value filter), while a
probe coroutine on the same loop wakes every 5 ms and records how late it woke: a search (or
its query's embedding) that ran on the loop would show as a stall of its whole duration.
Prints the load (``/proc/loadavg``), the put rate, the search times (median, p95, worst) and
the worst probe lateness in each phase (the plain searches' is the machine's noise floor: they
run off the loop too). The figure goes in ``RESULTS.md`` with its date and load.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

WORDS = (
    "cat dog fish car train plane pizza pasta river mountain city village music painting garden kitchen "
    "winter summer letter phone market school doctor lawyer bread cheese coffee tea rain snow ship road"
).split()


def hashed(dims: int, text: str) -> list[float]:
    vector = [0.0] * dims
    for word in re.findall(r"[a-z]+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dims] += 1.0 if digest[4] & 1 else -1.0
    return vector


def note(n: int) -> str:
    return " ".join(WORDS[(n * k + k * k) % len(WORDS)] for k in range(1, 9))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (an empty database) instead of SQLite")
    args = parser.parse_args()

    from langchain_core.embeddings import Embeddings
    from langgraph.store.base import PutOp

    from deerflow_ext.persistence import create_engine, upgrade_head
    from deerflow_ext.persistence.item_store import ItemStore
    from deerflow_ext.semantic import StoreIndex

    class Hashed(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hashed(args.dims, text) for text in texts]

        def embed_query(self, text: str) -> list[float]:
            return hashed(args.dims, text)

    folder = tempfile.mkdtemp(prefix="store-semantic-")
    url = args.postgres or f"sqlite+aiosqlite:///{folder}/bench.db"
    engine = create_engine(url)
    await upgrade_head(engine)
    index = StoreIndex(Hashed(), args.dims, ("text",), False, "hashed words")
    store = ItemStore(engine, index=index)
    load = os.getloadavg()
    print(
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {'PostgreSQL' if args.postgres else 'SQLite'}, "
        f"{args.items} items of {args.dims} dims"
    )

    started = time.perf_counter()
    for first in range(0, args.items, args.batch):
        ops = [
            PutOp(("bench", f"n{n % 10}"), f"k{n}", {"text": note(n), "group": n % 4})
            for n in range(first, min(first + args.batch, args.items))
        ]
        await store.abatch(ops)
    put_seconds = time.perf_counter() - started
    print(f"put: {args.items / put_seconds:,.0f} items/s ({put_seconds:.1f} s, batches of {args.batch})")

    lateness: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lateness.append(time.perf_counter() - before - 0.005)

    probing = asyncio.create_task(probe())
    times: list[float] = []
    for n in range(args.searches):
        query = note(n * 7919)
        filters = {"group": n % 4} if n % 2 else None
        begun = time.perf_counter()
        found = await store.asearch(("bench",), query=query, filter=filters, limit=10)
        times.append(time.perf_counter() - begun)
        if not found or found[0].score is None:
            raise SystemExit("store_semantic: a search found nothing scored")
    ranked_wakes = len(lateness)
    plain: list[float] = []
    for n in range(args.searches):  # the same searches without a query: what ranking adds
        begun = time.perf_counter()
        await store.asearch(("bench",), filter={"group": n % 4} if n % 2 else None, limit=10)
        plain.append(time.perf_counter() - begun)
    stop.set()
    await probing
    times.sort()
    p95 = times[max(0, int(len(times) * 0.95) - 1)]
    print(
        f"search over {args.items}: median {statistics.median(times) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
        f"worst {times[-1] * 1000:.1f} ms ({args.searches} searches, half filtered, limit 10)"
    )
    print(f"the same searches without a query: median {statistics.median(plain) * 1000:.1f} ms")
    ranked, unranked = lateness[:ranked_wakes], lateness[ranked_wakes:] or [0.0]
    print(
        f"event loop: worst probe lateness {max(ranked) * 1000:.1f} ms during the ranked searches "
        f"({len(ranked)} wakes), {max(unranked) * 1000:.1f} ms during the plain ones (the machine's own noise)"
    )
    await store.aclose()
    await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main())
