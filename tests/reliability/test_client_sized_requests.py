"""Requests whose cost a client sets (issue 54, rows 2-4, 7-9, 13): none of them stalls the
Gateway's event loop, and the ones past a limit get one 422 line naming the field and the
limit instead of a 500 or a 503.

The stall cases serve the Gateway on a real uvicorn (``live_uvicorn``) and poll ``/ok``
while the heavy requests run: the poller's worst wait is what every other client of the
process would have waited. Sizes are small (a few seconds a case); the figures for the sizes
the issue reported are in docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import live_server, make_settings
from pg_support import PG_UNREACHABLE, fresh_database

STALL_BOUND = 1.0
"""The longest ``/ok`` may wait while the store searches run (seconds; the old code held it
2 s at this size; the new one 0.03-0.3 s on a loaded two-core machine)."""
HISTORY_STALL_BOUND = 1.5
"""The same behind the copies and the history: the old code held it 5 s and more at this size;
the new one 0.1-1 s on a two-core machine at load 7 (the work moved off the loop is Python
too, so the loop waits for the interpreter lock, and under load for a core)."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
async def gateway(tmp_path: Path, database_url: str | None) -> AsyncIterator[httpx.AsyncClient]:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [], database_url=database_url))
    async with live_server(app) as served, served.client(timeout=120) as client:
        yield client


@pytest.fixture
async def sqlite_gateway(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    from deerflow_ext.gateway import create_app

    async with live_server(create_app(make_settings(tmp_path, []))) as served, served.client(timeout=120) as client:
        yield client


Heavy = Callable[[], Awaitable[httpx.Response]]


async def _worst_ok_while(client: httpx.AsyncClient, heavy: list[Heavy]) -> tuple[float, list[httpx.Response]]:
    """Run ``heavy`` all at once while polling ``/ok``: the poller's worst wait, and the
    heavy requests' answers."""
    worst = 0.0
    done = asyncio.Event()

    async def poll() -> None:
        nonlocal worst
        while not done.is_set():
            started = time.monotonic()
            assert (await client.get("/ok")).status_code == 200
            worst = max(worst, time.monotonic() - started)
            await asyncio.sleep(0.02)

    poller = asyncio.create_task(poll())
    await asyncio.sleep(0.1)
    try:
        answers = await asyncio.gather(*(request() for request in heavy))
    finally:
        done.set()
        await poller
    return worst, list(answers)


# -- row 2: store search ------------------------------------------------------------------


async def test_store_searches_over_big_items_leave_the_loop_free(sqlite_gateway: httpx.AsyncClient) -> None:
    client = sqlite_gateway
    pad = "x" * (200 * 1024)
    for start in range(0, 240, 24):
        puts = [
            client.put(
                "/api/store/items", json={"namespace": ["big"], "key": f"k{i:03}", "value": {"pad": pad, "i": i}}
            )
            for i in range(start, start + 24)
        ]
        assert all(r.status_code == 204 for r in await asyncio.gather(*puts))

    def search(body: dict[str, Any]) -> Heavy:
        return lambda: client.post("/api/store/items/search", json={"namespace_prefix": ["big"], **body})

    heavy = [search({"filter": {"i": -1}, "limit": 10}) for _ in range(3)] + [search({"limit": 1000})]
    worst, answers = await _worst_ok_while(client, heavy)
    assert all(a.status_code == 200 for a in answers), [a.text[:200] for a in answers]
    assert worst < STALL_BOUND, f"/ok waited {worst:.2f}s behind the searches"
    assert [len(a.json()["items"]) for a in answers[:3]] == [0, 0, 0]  # every item was read and filtered out
    everything = answers[3].json()["items"]
    # 240 values of 200 KiB are 48 MiB; the answer stops at 16 MiB, newest first.
    assert len(everything) == 16 * 1024 * 1024 // (len(pad) + 20)
    stamps = [item["updated_at"] for item in everything]
    assert stamps == sorted(stamps, reverse=True) and len({item["key"] for item in everything}) == len(everything)


# -- row 4: copy and history --------------------------------------------------------------


TURNS = 90  # state updates: a checkpoint each, holding the messages so far (25 MB in all)


async def test_copies_and_a_long_history_leave_the_loop_free(sqlite_gateway: httpx.AsyncClient) -> None:
    client = sqlite_gateway
    thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
    for turn in range(TURNS):
        messages = [{"role": "user", "content": f"{turn} " + "u" * 3000}, {"role": "ai", "content": "a" * 3000}]
        answer = await client.post(f"/api/threads/{thread_id}/state", json={"values": {"messages": messages}})
        assert answer.status_code == 200, answer.text

    heavy: list[Heavy] = [lambda: client.post(f"/api/threads/{thread_id}/copy") for _ in range(3)]
    heavy.append(lambda: client.get(f"/api/threads/{thread_id}/history", params={"limit": 1000}))
    worst, answers = await _worst_ok_while(client, heavy)
    assert all(a.status_code == 200 for a in answers), [a.text[:200] for a in answers]
    assert worst < HISTORY_STALL_BOUND, f"/ok waited {worst:.2f}s behind the copies and the history"
    states = answers[-1].json()
    assert len(states) == TURNS and len(states[0]["values"]["messages"]) == 2 * TURNS  # the history is whole
    for copy in answers[:-1]:
        copied = (await client.get(f"/api/threads/{copy.json()['thread_id']}/history", params={"limit": 1000})).json()
        assert [s["values"] for s in copied] == [s["values"] for s in states]


# -- row 3 and 8: metadata filters --------------------------------------------------------


@pytest.mark.parametrize("route", ["/api/threads/search", "/api/threads/count", "/api/assistants/search"])
async def test_a_metadata_filter_past_its_limit_is_one_422_naming_it(gateway: httpx.AsyncClient, route: str) -> None:
    started = time.monotonic()
    answer = await gateway.post(route, json={"metadata": {f"k{i}": i for i in range(5000)}})
    assert answer.status_code == 422, answer.text
    assert (
        answer.json()["detail"] == "metadata: Value error, metadata: a filter names at most 100 values, this one 5000"
    )
    assert time.monotonic() - started < 5
    fine = await gateway.post(route, json={"metadata": {f"k{i}": i for i in range(100)}})
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize("route", ["/api/threads/search", "/api/assistants/search"])
async def test_an_integer_past_64_bits_in_a_metadata_filter_is_a_422(gateway: httpx.AsyncClient, route: str) -> None:
    answer = await gateway.post(route, json={"metadata": {"n": 2**64}})
    assert answer.status_code == 422, answer.text
    assert "metadata.n: an integer in a filter lies within -2**63 .. 2**63-1" in answer.json()["detail"]
    nested = await gateway.post(route, json={"metadata": {"a": {"b": -(2**63) - 1}}})
    assert nested.status_code == 422 and "metadata.a.b:" in nested.json()["detail"]
    edge = await gateway.post(route, json={"metadata": {"n": 2**63 - 1}})
    assert edge.status_code == 200, edge.text


# -- row 9: thread search ids -------------------------------------------------------------


async def test_too_many_ids_are_a_422_naming_ids(gateway: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    answer = await gateway.post("/api/threads/search", json={"ids": ["x"] * 40_000})  # within the body's limits
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith("ids: List should have at most 10000 items")
    assert max((len(r.getMessage()) for r in caplog.records), default=0) < 10_000
    thread_id = (await gateway.post("/api/threads", json={})).json()["thread_id"]
    ids = [thread_id, *(str(i) for i in range(9_999))]
    found = await gateway.post("/api/threads/search", json={"ids": ids})
    assert found.status_code == 200 and [t["thread_id"] for t in found.json()] == [thread_id]


def test_a_failed_statement_is_logged_by_its_start_not_whole(caplog: pytest.LogCaptureFixture) -> None:
    from sqlalchemy.exc import DBAPIError

    from deerflow_ext.gateway.errors import log_unexpected

    statement = "SELECT threads.id FROM threads WHERE threads.id IN (" + ", ".join(["$1"] * 40_000) + ")"
    unavailable = DBAPIError(statement, ("x",) * 40_000, ConnectionError("the number of arguments"))
    broken = DBAPIError(statement, ("x",) * 40_000, ValueError("refused"))
    caplog.set_level(logging.WARNING)
    for exc in (unavailable, broken):
        try:
            raise exc
        except DBAPIError as raised:
            log_unexpected({"method": "POST", "path": "/api/threads/search"}, raised)
    texts = [caplog.handler.format(r) for r in caplog.records]  # the traceback included
    assert len(texts) == 2 and all("SELECT threads.id FROM threads WHERE" in t for t in texts), texts
    assert all(len(text) < 4_000 for text in texts), [len(t) for t in texts]


# -- row 7 and 13: store ttl and filters --------------------------------------------------


@pytest.mark.parametrize("ttl", [1e12, 1e308])
async def test_a_ttl_past_100_years_is_a_422_naming_ttl(gateway: httpx.AsyncClient, ttl: float) -> None:
    body = {"namespace": ["t"], "key": "k", "value": {"v": 1}, "ttl": ttl}
    answer = await gateway.put("/api/store/items", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "ttl: Input should be less than or equal to 52704000"
    assert (await gateway.put("/api/store/items", json={**body, "ttl": 52_704_000})).status_code == 204


async def test_a_store_filter_mixing_operators_and_fields_is_a_422(gateway: httpx.AsyncClient) -> None:
    for key, value in (("a", {"v": 5}), ("b", {"v": {"$eq": 1}}), ("c", {"v": 1})):
        assert (
            await gateway.put("/api/store/items", json={"namespace": ["f"], "key": key, "value": value})
        ).status_code == 204

    async def search(filter: dict[str, Any]) -> httpx.Response:
        return await gateway.post("/api/store/items/search", json={"namespace_prefix": ["f"], "filter": filter})

    mixed = await search({"v": {"$gte": 4, "zzz": 100}})
    assert mixed.status_code == 422
    assert mixed.json()["detail"] == "filter.v: an object holding operators ($gte) cannot also hold fields (zzz)"
    literal = await search({"v": {"$eq": {"$eq": 1}}})
    assert literal.status_code == 200 and [item["key"] for item in literal.json()["items"]] == ["b"]


async def test_a_history_metadata_filter_past_its_limit_is_a_422(gateway: httpx.AsyncClient) -> None:
    thread_id = (await gateway.post("/api/threads", json={})).json()["thread_id"]
    answer = await gateway.post(
        f"/api/threads/{thread_id}/history", json={"metadata": {f"k{i}": i for i in range(500)}}
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "metadata: Value error, a filter names at most 100 keys, this one 500"
    assert (await gateway.post(f"/api/threads/{thread_id}/history", json={"metadata": {"k": 1}})).json() == []
