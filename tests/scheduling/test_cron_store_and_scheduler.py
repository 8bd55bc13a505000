"""The cron store and scheduler on SQLite and PostgreSQL, with a clock the test moves.

What the HTTP suite cannot see: ticks missed while no scheduler ran fire once, not once
each; two claimers of one database share a tick between them, one each; a scheduler with no
cron makes one query and then sleeps until it is told a cron changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event

from deerflow_ext.persistence import create_engine
from deerflow_ext.persistence.transactions import Transactions, transactions_for
from deerflow_ext.scheduling import CronDraft, CronStore, Due, ScheduleError, Scheduler, check_schedule, next_tick

START = datetime(2026, 12, 7, 8, 59, 30, tzinfo=UTC)


class MovableClock:
    """A real ``Clock``: its time is what the test set; sleeping until a time is 0 once it came."""

    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current

    def seconds_until(self, when: datetime) -> float:
        return max(0.0, (when - self.current).total_seconds())


@pytest.fixture
async def transactions(engine: Any) -> AsyncIterator[Transactions]:
    tx = transactions_for(engine)
    try:
        yield tx
    finally:
        await tx.aclose()


def _draft(schedule: str = "* * * * *", **fields: Any) -> CronDraft:
    return CronDraft(assistant_id="lead_agent", schedule=schedule, payload={"input": {}}, **fields)


def test_schedules_are_five_fields_in_utc_or_the_named_zone() -> None:
    assert next_tick("0 9 * * *", None, START) == datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    assert next_tick("0 9 * * *", "Europe/Paris", START) == datetime(2026, 12, 8, 8, 0, tzinfo=UTC)
    for bad, says in (
        ("* * * * * *", "6 field"),
        ("@daily", "1 field"),
        ("0 25 * * *", "not a valid"),
        ("0 0 30 2 *", "no date"),
    ):
        with pytest.raises(ScheduleError, match=says):
            check_schedule(bad)
    with pytest.raises(ScheduleError, match="timezone"):
        check_schedule("* * * * *", "Nowhere/Land")


async def test_ticks_missed_while_down_fire_once_then_the_schedule_resumes(transactions: Transactions) -> None:
    store = CronStore(transactions)
    cron = await store.create(_draft(), START)
    assert cron.next_run_date == datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    later = START + timedelta(minutes=5, seconds=10)  # five ticks passed with no Gateway running
    (due,) = await store.claim_due(later)
    assert due.tick == cron.next_run_date
    assert await store.claim_due(later) == []
    after = await store.get(cron.cron_id)
    assert after is not None and after.next_run_date == datetime(2026, 12, 7, 9, 5, tzinfo=UTC)


async def test_an_end_time_past_makes_the_cron_fire_no_more(transactions: Transactions) -> None:
    store = CronStore(transactions)
    cron = await store.create(_draft(end_time=START + timedelta(minutes=1, seconds=10)), START)
    assert len(await store.claim_due(START + timedelta(seconds=31))) == 1  # 09:00
    assert len(await store.claim_due(START + timedelta(minutes=1, seconds=31))) == 0  # 09:01 is past the end
    after = await store.get(cron.cron_id)
    assert after is not None and after.next_run_date is None
    assert await store.earliest() is None


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_two_claimers_on_one_postgresql_share_each_tick_once(engine: Any, database_url: str) -> None:
    other_engine = create_engine(database_url)
    mine, theirs = CronStore(transactions_for(engine)), CronStore(transactions_for(other_engine))
    try:
        crons = [await mine.create(_draft(), START) for _ in range(20)]
        ids = {c.cron_id for c in crons}
        for minute in range(3):
            now = START + timedelta(minutes=minute, seconds=31)
            claims = await asyncio.gather(*(store.claim_due(now, limit=5) for store in (mine, theirs, mine, theirs)))
            claims += [await mine.claim_due(now)]  # whatever the limits left
            fired = [d.cron.cron_id for claim in claims for d in claim]
            assert sorted(fired) == sorted(ids), f"minute {minute}: each cron once"
    finally:
        await other_engine.dispose()


def _counting(engine: Any, transactions: Transactions) -> list[str]:
    sync = getattr(transactions, "engine", engine)
    sync = getattr(sync, "sync_engine", sync)
    seen: list[str] = []

    @event.listens_for(sync, "before_cursor_execute")
    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "crons" in statement:
            seen.append(statement)

    return seen


async def test_a_scheduler_without_crons_queries_once_and_wakes_on_a_create(
    engine: Any, transactions: Transactions
) -> None:
    statements = _counting(engine, transactions)
    clock = MovableClock(START)
    store = CronStore(transactions)
    fired: list[Due] = []

    async def fire(due: Due) -> None:
        fired.append(due)

    scheduler = Scheduler(store, fire, clock, recheck=0.05)  # a recheck would show as queries
    await scheduler.start()
    try:
        await asyncio.sleep(0.5)
        assert len(statements) == 1, statements
        await store.create(_draft("0 9 * * *"), clock.now())
        scheduler.changed()
        await asyncio.sleep(0.3)
        assert fired == []
        clock.current = START + timedelta(seconds=31)  # 09:00:01: the tick came
        scheduler.changed()
        for _ in range(50):
            if fired:
                break
            await asyncio.sleep(0.05)
        assert [d.tick for d in fired] == [datetime(2026, 12, 7, 9, 0, tzinfo=UTC)]
    finally:
        await scheduler.stop()
