"""Crons driven by ``langgraph_sdk`` (sync and async) against our Gateway on a real uvicorn,
on SQLite and PostgreSQL.

Time is accelerated for real: the Gateway's cron clock runs ``SCALE`` times faster from an
epoch the test knows (``DEERFLOW_TEST_CRON_CLOCK``, read once at startup), so a schedule of
every minute ticks every real half second, and the scheduler sleeps, claims and fires exactly as
in production, only with shorter sleeps.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from platform_support import PLUGINS, human

from gateway.sdk_server import SdkServer, sdk_server
from pg_support import PG_UNREACHABLE, fresh_database

SCALE = 120.0
EVERY_MINUTE = "* * * * *"
DAILY = "0 9 * * *"


class VirtualTime:
    """The Gateway's cron clock, as the test reads it."""

    def __init__(self, epoch: float) -> None:
        self.epoch = epoch

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.epoch + (time.time() - self.epoch) * SCALE, UTC)

    def sleep_virtual(self, minutes: float) -> None:
        time.sleep(minutes * 60 / SCALE)


class Served(VirtualTime):
    def __init__(self, server: SdkServer, epoch: float) -> None:
        super().__init__(epoch)
        self.server = server
        self.url = server.url


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory: Path = tmp_path_factory.mktemp(f"crons-{request.param}")
    epoch = time.time()
    previous = os.environ.get("DEERFLOW_TEST_CRON_CLOCK")
    os.environ["DEERFLOW_TEST_CRON_CLOCK"] = f"{epoch}:{SCALE}"
    try:
        with contextlib_database(request.param) as url:
            with sdk_server(directory, database_url=url, plugins=PLUGINS) as server:
                _restore(previous)  # read at startup only
                yield Served(server, epoch)
    finally:
        _restore(previous)


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop("DEERFLOW_TEST_CRON_CLOCK", None)
    else:
        os.environ["DEERFLOW_TEST_CRON_CLOCK"] = previous


class contextlib_database:
    """None (the server's own SQLite) or a fresh PostgreSQL database's URL."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._pg: Any = None

    def __enter__(self) -> str | None:
        if self.kind == "sqlite":
            return None
        if PG_UNREACHABLE:
            pytest.skip(PG_UNREACHABLE)
        self._pg = fresh_database()
        name = self._pg.__enter__()
        return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"

    def __exit__(self, *exc: Any) -> None:
        if self._pg is not None:
            self._pg.__exit__(*exc)


@pytest.fixture
def client(served: Served) -> Any:
    return get_sync_client(url=served.url, api_key=None)


def _eventually(check: Any, seconds: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what}: did not happen within {seconds}s"
        time.sleep(0.1)


def _cron_runs(client: Any, thread_id: str) -> list[dict[str, Any]]:
    return [r for r in client.runs.list(thread_id, limit=1000) if "cron_id" in r["metadata"]]


def test_sync_client_creates_searches_counts_updates_and_deletes_crons(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    tag = {"suite": "crud-" + thread}
    on_thread = client.crons.create_for_thread(
        thread, "lead_agent", schedule=DAILY, input=human("report"), metadata=tag, multitask_strategy="enqueue"
    )
    stateless = client.crons.create("lead_agent", schedule="30 6 * * 1-5", input=human("digest"), metadata=tag)
    assert on_thread["thread_id"] == thread and on_thread["schedule"] == DAILY
    assert on_thread["payload"]["multitask_strategy"] == "enqueue"
    assert on_thread["payload"]["input"] == human("report")
    assert on_thread["enabled"] is True and on_thread["metadata"] == tag
    assert stateless["thread_id"] is None and stateless["on_run_completed"] == "delete"
    next_run = datetime.fromisoformat(on_thread["next_run_date"])
    assert (next_run.hour, next_run.minute) == (9, 0)

    assert client.crons.count(metadata=tag) == 2
    assert client.crons.count(thread_id=thread) == 1
    found = client.crons.search(metadata=tag, sort_by="created_at", sort_order="asc")
    assert [c["cron_id"] for c in found] == [on_thread["cron_id"], stateless["cron_id"]]
    only = client.crons.search(thread_id=thread, select=["cron_id", "schedule"])
    assert only == [{"cron_id": on_thread["cron_id"], "schedule": DAILY}]

    changed = client.crons.update(stateless["cron_id"], schedule="15 7 * * *", enabled=False, on_run_completed="keep")
    assert changed["schedule"] == "15 7 * * *" and changed["enabled"] is False
    assert changed["on_run_completed"] == "keep" and changed["payload"]["input"] == human("digest")
    assert client.crons.search(metadata=tag, enabled=False)[0]["cron_id"] == stateless["cron_id"]

    client.crons.delete(on_thread["cron_id"])
    client.crons.delete(stateless["cron_id"])
    assert client.crons.count(metadata=tag) == 0
    with pytest.raises(httpx.HTTPStatusError) as gone:
        client.crons.delete(on_thread["cron_id"])
    assert gone.value.response.status_code == 404


def test_async_client_creates_searches_counts_and_deletes_crons(served: Served) -> None:
    async def scenario() -> None:
        aclient = get_client(url=served.url, api_key=None)
        thread = (await aclient.threads.create())["thread_id"]
        tag = {"suite": "async-" + thread}
        cron = await aclient.crons.create_for_thread(
            thread, "lead_agent", schedule=DAILY, input=human("x"), metadata=tag
        )
        other = await aclient.crons.create("lead_agent", schedule=DAILY, input=human("y"), metadata=tag)
        assert await aclient.crons.count(metadata=tag) == 2
        assert {c["cron_id"] for c in await aclient.crons.search(metadata=tag)} == {cron["cron_id"], other["cron_id"]}
        await aclient.crons.delete(cron["cron_id"])
        await aclient.crons.delete(other["cron_id"])
        assert await aclient.crons.count(metadata=tag) == 0

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"schedule": DAILY, "webhook": "http://example.com/hook"}, "http:// is refused"),
        ({"schedule": "* * * * * *"}, "has 6 field(s)"),
        ({"schedule": "61 * * * *"}, "not a valid cron expression"),
        ({"schedule": DAILY, "timezone": "Mars/Olympus"}, "timezone"),
        ({"schedule": DAILY, "multitask_strategy": "sometimes"}, "multitask_strategy"),
        ({"schedule": DAILY, "assistant_id": "nobody"}, "assistant nobody not found"),
    ],
)
def test_a_cron_no_run_would_take_is_refused_with_one_line(served: Served, body: dict[str, Any], says: str) -> None:
    answer = httpx.post(f"{served.url}/runs/crons", json={"assistant_id": "lead_agent", "input": {}, **body})
    assert answer.status_code in (404, 422), answer.text
    assert says in answer.json()["detail"]


def test_a_thread_cron_fires_a_run_each_minute_until_deleted(client: Any, served: Served) -> None:
    thread = client.threads.create()["thread_id"]
    cron = client.crons.create_for_thread(
        thread, "lead_agent", schedule=EVERY_MINUTE, input=human("tick"), multitask_strategy="enqueue"
    )
    _eventually(lambda: len(_cron_runs(client, thread)) >= 3, what="three ticks' runs")
    client.crons.delete(cron["cron_id"])
    served.sleep_virtual(1.5)  # a tick claimed just before the delete may still start its run
    runs = _cron_runs(client, thread)
    ticks = [datetime.fromisoformat(r["metadata"]["cron_tick"]) for r in runs]
    assert all(r["metadata"]["cron_id"] == cron["cron_id"] for r in runs)
    assert len(set(ticks)) == len(ticks), "a tick fired twice"
    assert all(t.second == 0 for t in ticks)
    served.sleep_virtual(3)
    assert len(_cron_runs(client, thread)) == len(runs), "a deleted cron fired"


def test_a_stateless_cron_deletes_each_runs_thread_unless_keep(client: Any, served: Served) -> None:
    app = served.server.app
    before = client.threads.count()
    fired = app.state.runtime.crons.fired
    deleting = client.crons.create("lead_agent", schedule=EVERY_MINUTE, input=human("gone"))
    _eventually(lambda: app.state.runtime.crons.fired >= fired + 2, what="two firings")
    client.crons.delete(deleting["cron_id"])
    _eventually(lambda: client.threads.count() == before, what="the firings' threads deleted")

    keeping = client.crons.create("lead_agent", schedule=EVERY_MINUTE, input=human("kept"), on_run_completed="keep")
    _eventually(lambda: client.threads.count() >= before + 2, what="two kept threads")
    client.crons.delete(keeping["cron_id"])
    kept = client.threads.search(limit=100, sort_by="created_at", sort_order="desc")
    runs = [r for t in kept for r in client.runs.list(t["thread_id"]) if r["metadata"].get("cron_id")]
    ids = {r["metadata"]["cron_id"] for r in runs}
    assert ids & {deleting["cron_id"], keeping["cron_id"]} == {keeping["cron_id"]}


def test_end_time_stops_a_cron(client: Any, served: Served) -> None:
    thread = client.threads.create()["thread_id"]
    end = served.now() + timedelta(minutes=2, seconds=30)
    cron = client.crons.create_for_thread(
        thread, "lead_agent", schedule=EVERY_MINUTE, input=human("until"), end_time=end, multitask_strategy="enqueue"
    )
    _eventually(lambda: served.now() > end + timedelta(minutes=2), what="the end time passing")
    runs = _cron_runs(client, thread)
    assert 2 <= len(runs) <= 3, [r["metadata"]["cron_tick"] for r in runs]
    assert all(datetime.fromisoformat(r["metadata"]["cron_tick"]) <= end for r in runs)
    (row,) = client.crons.search(thread_id=thread)
    assert row["next_run_date"] is None
    served.sleep_virtual(2)
    assert len(_cron_runs(client, thread)) == len(runs)
    client.crons.delete(cron["cron_id"])


def test_ticks_missed_while_the_gateway_was_down_fire_once_after_its_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    epoch = time.time()
    monkeypatch.setenv("DEERFLOW_TEST_CRON_CLOCK", f"{epoch}:{SCALE}")
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'crons.db'}"
    clock = VirtualTime(epoch)
    with sdk_server(tmp_path / "first", database_url=database_url) as server:
        client = get_sync_client(url=server.url, api_key=None)
        thread = client.threads.create()["thread_id"]
        client.crons.create_for_thread(
            thread, "lead_agent", schedule=EVERY_MINUTE, input=human("tick"), multitask_strategy="enqueue"
        )
        _eventually(lambda: len(_cron_runs(client, thread)) >= 1, what="a first tick's run")
    clock.sleep_virtual(5)  # five ticks or more pass with no Gateway running
    restarted, restarted_real = clock.now(), datetime.now(UTC)  # every tick up to here was missed
    with sdk_server(tmp_path / "second", database_url=database_url) as server:
        client = get_sync_client(url=server.url, api_key=None)

        def after_restart() -> list[dict[str, Any]]:
            runs = _cron_runs(client, thread)
            return [r for r in runs if datetime.fromisoformat(r["created_at"]) >= restarted_real]

        _eventually(
            lambda: any(datetime.fromisoformat(r["metadata"]["cron_tick"]) > restarted for r in after_restart()),
            what="a tick after the restart",
        )
        late = [datetime.fromisoformat(r["metadata"]["cron_tick"]) for r in after_restart()]
        ticks = [datetime.fromisoformat(r["metadata"]["cron_tick"]) for r in _cron_runs(client, thread)]
    missed = [t for t in late if t <= restarted]
    assert len(missed) == 1, f"ticks missed until {restarted} fired {len(missed)} times: {sorted(late)}"
    assert len(set(ticks)) == len(ticks)
