"""A follow-up run tells the other Gateway processes to stop its thread's older runs only when
there is one: the stop request is written with the follow-up's row, and ``pg_notify`` goes
out only when that marked a run (every run paid for both before, alone on its
thread or not). Real PostgreSQL: the manager publishes through ``PostgresRunSignals``, a
second one listens as the other process would."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from deerflow_ext.persistence import is_sqlite
from deerflow_ext.persistence.checkpointer import psycopg_conninfo
from deerflow_ext.runtime import MultitaskStrategy, RunManager
from deerflow_ext.runtime.signals import PostgresRunSignals
from deerflow_ext.testing import wait_until
from gateway.gw_fixtures import FakeAgentHost, LifecycleRecorder, extensions_with

pytestmark = pytest.mark.postgres

SLOW = [{"role": "user", "content": "slow"}]


class OtherProcess:
    """What another process's manager is told (``RunSignalHandler``)."""

    def __init__(self) -> None:
        self.interrupts: list[tuple[str, str, bool]] = []

    def cancel(self, run_id: str, *, rollback: bool = False) -> bool:
        return False

    def interrupt_thread(
        self, thread_id: str, *, by_run_id: str, created_before: datetime | None, rollback: bool = False
    ) -> int:
        self.interrupts.append((thread_id, by_run_id, rollback))
        return 0

    def recheck(self) -> None:
        return None


async def test_only_a_follow_up_with_an_older_live_run_signals_and_marks_it(bench: Any, database_url: str) -> None:
    if is_sqlite(database_url):
        pytest.skip("run signals travel through PostgreSQL")
    conninfo = psycopg_conninfo(database_url)
    listener, publisher, other = PostgresRunSignals(conninfo), PostgresRunSignals(conninfo), OtherProcess()
    await listener.start(other)
    ext = extensions_with(lifecycle=LifecycleRecorder())
    runs = RunManager(store=bench.store, agent_host=FakeAgentHost(delay=30), extensions=lambda: ext, signals=publisher)
    try:
        alone = (await bench.store.create_thread()).id
        busy = (await bench.store.create_thread()).id
        # Fresh threads: nothing older to stop, so nothing is marked and nothing is sent.
        first = await runs.start(alone, messages=SLOW)
        older = await runs.start(busy, messages=SLOW)
        # A follow-up on the busy thread marks the older run and signals; NOTIFYs of one
        # session arrive in order, so a signal from either earlier run would come first.
        follow_up = await runs.start(busy, messages=SLOW, multitask_strategy=MultitaskStrategy.ROLLBACK)
        await wait_until(lambda: other.interrupts, timeout=10)
        assert other.interrupts == [(busy, follow_up.run_id, True)]
        recorded = await bench.store.cancel_requests([first.run_id, older.run_id, follow_up.run_id])
        assert recorded == {older.run_id: "rollback"}
    finally:
        await runs.drain(grace=5)
        await listener.aclose()
