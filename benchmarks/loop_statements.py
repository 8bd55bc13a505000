"""What one PostgreSQL statement sent from the event loop costs the loop: asyncpg's ``Pool``
against the slots of ``persistence/loop_statements.py``.

Run: ``PYTHONPATH=src python benchmarks/loop_statements.py [--url URL] [--statements N]
[--rounds R]``. Not a test: it prints the CPU per statement, measured side by side in one
process (needs a PostgreSQL server; default the one on 127.0.0.1:5432, database ``test``).

Three concurrent senders, as many as each arm has connections, send a one-row ``SELECT``
with one parameter on uvloop, as the Gateway serves. Arms, alternating within every round:

- ``nothing``: the harness alone (a semaphore and ``asyncio.sleep(0)`` per "statement");
- ``asyncpg Pool``: ``pool.acquire()``, the statement, release (the reset a no-op, as
  ``loop_statements`` would have set it);
- ``loop slots``: ``LoopStatements.fetch`` (its queue of connections, the statement
  compiled once by SQLAlchemy, asyncpg's ``fetch``).

CPU is the process's (``time.process_time``): one thread here, so it is the loop's. Each
figure is the median over rounds of the mean per statement.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg
import uvloop
from sqlalchemy import bindparam, literal_column, select
from sqlalchemy.ext.asyncio import create_async_engine

from deerflow_ext.persistence.loop_statements import LoopStatements, compile_statement

SENDERS = 3
_QUERY = select(literal_column("1").label("one")).where(bindparam("value") != "")


async def _measure(arm: Callable[[], Awaitable[object]], statements: int) -> float:
    gate = asyncio.Semaphore(SENDERS)

    async def one() -> None:
        async with gate:
            await arm()

    start = time.process_time()
    await asyncio.gather(*(one() for _ in range(statements)))
    return (time.process_time() - start) / statements * 1e6


async def _keep(_connection: asyncpg.Connection) -> None:
    return None


async def main(url: str, statements: int, rounds: int) -> None:
    engine = create_async_engine(url)
    slots = LoopStatements.for_engine(engine)
    assert slots is not None, "a postgresql+asyncpg:// URL"
    _args, kwargs = engine.dialect.create_connect_args(engine.url)
    pool = await asyncpg.create_pool(min_size=SENDERS, max_size=SENDERS, reset=_keep, **kwargs)
    params = {"value": "x"}
    compiled = compile_statement(_QUERY, frozenset(params))  # the very statement the slots send
    values = compiled.values(params)

    async def nothing() -> None:
        await asyncio.sleep(0)

    async def pooled() -> None:
        async with pool.acquire() as connection:
            await connection.fetch(compiled.sql, *values)

    async def slotted() -> None:
        await slots.fetch(_QUERY, params)

    arms = {"nothing": nothing, "asyncpg Pool": pooled, "loop slots": slotted}
    for arm in arms.values():  # connections opened, statements prepared
        await _measure(arm, 300)
    figures: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, arm in arms.items():
            figures[name].append(await _measure(arm, statements))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"{statements} statements x {rounds} rounds, {SENDERS} senders; loop CPU per statement (median)")
    for name, value in medians.items():
        net = value - medians["nothing"]
        print(f"  {name:14s} {value:7.1f} us   less the harness {net:7.1f} us")
    print(
        f"  asyncpg Pool / loop slots, less the harness: "
        f"{(medians['asyncpg Pool'] - medians['nothing']) / (medians['loop slots'] - medians['nothing']):.2f}x"
    )
    await pool.close()
    await slots.aclose()
    await engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--statements", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    uvloop.run(main(options.url, options.statements, options.rounds))
