"""The webhook outbox on a real database (SQLite, and PostgreSQL when reachable): the row a run's
end owes is written in the very transaction that records the run's end, and the claims that
decide each attempt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from deerflow_ext.persistence import WEBHOOK_OUTBOX, HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.records import PROCESS_OWNER
from deerflow_ext.webhooks import Outbox, WebhookOrder


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[HostStore]:
    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        yield HostStore(make_session_factory(engine))
    finally:
        await engine.dispose()


def _row(run_id: str, thread_id: str, status: str = "success") -> dict:
    order = WebhookOrder("https://hooks.example.com/x", "lead_agent", {"m": 1}, {"input": {}}, "reject")
    return order.outbox_row(
        run_id=run_id, thread_id=thread_id, status=status, created_at=None, started_at=None, error=None, values={}
    )


async def _runs_owing_webhooks(store: HostStore, count: int) -> None:
    """``count`` runs (``r-0``...) that ended on one thread, each owing its webhook."""
    thread = await store.create_thread()
    for index in range(count):
        await store.create_run(thread.id, f"r-{index}", {}, owner=PROCESS_OWNER)
        await store.finish_run(
            f"r-{index}", status="success", outcome="completed", webhook=_row(f"r-{index}", thread.id)
        )


async def _outbox(store: HostStore) -> list[dict]:
    def read(conn):  # type: ignore[no-untyped-def]
        return [dict(r._mapping) for r in conn.execute(select(WEBHOOK_OUTBOX))]

    return await store.transactions.read(read)


async def test_a_runs_end_and_its_outbox_row_commit_together_or_not_at_all(store: HostStore) -> None:
    thread = await store.create_thread()
    for run_id in ("r-1", "r-2"):
        await store.create_run(thread.id, run_id, {}, owner=PROCESS_OWNER)
    owed = _row("r-1", thread.id)
    await store.finish_run(
        "r-1", status="success", outcome="completed", thread_id=thread.id, thread_status="idle", webhook=owed
    )
    [row] = await _outbox(store)
    assert (row["delivery_id"], row["status"], row["attempts"]) == (owed["delivery_id"], "pending", 0)
    assert row["payload"]["run_id"] == "r-1" and row["payload"]["metadata"] == {"m": 1}
    # The same row again cannot be inserted: the run's end it came with is not recorded either.
    with pytest.raises(Exception):  # noqa: B017 - each driver names its own integrity error
        await store.finish_run(
            "r-2",
            status="error",
            outcome="failed",
            thread_id=thread.id,
            thread_status="error",
            webhook={**owed, "run_id": "r-2"},
        )
    failed = await store.get_run(thread.id, "r-2")
    assert failed is not None and failed.status == "pending" and failed.finished_at is None
    assert (await store.get_thread(thread.id)).status == "idle"  # type: ignore[union-attr]
    # A run without a webhook writes no row.
    await store.finish_run("r-2", status="success", outcome="completed", thread_id=thread.id, thread_status="idle")
    assert len(await _outbox(store)) == 1


async def test_a_claim_owns_its_rows_until_settled_or_its_lease_ends(store: HostStore) -> None:
    await _runs_owing_webhooks(store, 3)
    outbox = Outbox(store.transactions)
    now = datetime.now(UTC) + timedelta(seconds=1)
    first = await outbox.claim(now, lease=60, limit=2)
    second = await outbox.claim(now, lease=60, limit=2)
    assert len(first) == 2 and len(second) == 1
    assert {c.delivery_id for c in first}.isdisjoint(c.delivery_id for c in second)
    assert await outbox.claim(now, lease=60, limit=10) == []  # all leased
    assert all(c.attempts == 1 for c in first + second)
    await outbox.delivered(first[0].delivery_id, 200, now)
    await outbox.attempt_failed(first[1].delivery_id, 500, "the receiver answered 500", None, now)
    await outbox.attempt_failed(second[0].delivery_id, None, "ConnectError", now + timedelta(seconds=5), now)
    assert await outbox.counts() == {"pending": 1, "delivered": 1, "failed": 1}
    later = await outbox.claim(now + timedelta(seconds=6), lease=60, limit=10)
    assert [(c.delivery_id, c.attempts) for c in later] == [(second[0].delivery_id, 2)]
    # A settled row is not changed by a late report of an attempt (the guard is its status).
    await outbox.attempt_failed(first[0].delivery_id, 500, "late", now, now)
    assert (await outbox.listing("delivered", None, 10))[0]["last_status_code"] == 200


async def test_recovery_writes_what_an_orphaned_runs_webhook_owes_with_its_end(store: HostStore) -> None:
    thread = await store.create_thread()
    await store.create_run(thread.id, "r-hook", {"webhook": "https://hooks.example.com/x"}, owner="dead-1")
    await store.create_run(thread.id, "r-none", {}, owner="dead-1")
    asked: list[str] = []

    def owed(run_id, thread_id, stored, created, started):  # type: ignore[no-untyped-def]
        asked.append(run_id)
        return _row(run_id, thread_id, "interrupted") if stored.get("webhook") else None

    ended = await store.interrupt_orphaned_runs(is_dead=lambda owner: owner == "dead-1", owed=owed)
    assert sorted(ended) == ["r-hook", "r-none"] and sorted(asked) == ["r-hook", "r-none"]
    [row] = await _outbox(store)
    assert row["run_id"] == "r-hook" and row["payload"]["status"] == "interrupted"


async def test_runs_another_process_ends_for_a_dead_one_owe_their_webhooks_too(database_url: str) -> None:
    """PostgreSQL, several processes: the thread hold's takeover (``TAKE``) and the presence
    sweep end a dead process's runs; each writes their deliveries in the same statement."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the takeover and the presence sweep are PostgreSQL's")
    from sqlalchemy import text

    from deerflow_ext.runtime.pg_hold_statements import TAKE
    from deerflow_ext.runtime.presence import ProcessPresence

    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        store = HostStore(make_session_factory(engine))
        hook = {"webhook": "https://hooks.example.com/x", "assistant_id": "a1", "metadata": {"m": 2}, "input": {}}
        thread = await store.create_thread()
        await store.create_run(thread.id, "r-running", hook, owner="dead-1")
        assert await store.mark_started("r-running", thread.id)
        await store.create_run(thread.id, "r-plain", {}, owner="dead-1")
        queued_thread = await store.create_thread()
        await store.create_run(queued_thread.id, "r-queued", hook, owner="dead-2")
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO gateway_processes (owner, started_at, heartbeat_at, expires_at) VALUES "
                    "('dead-2', now(), now(), now() - interval '1 minute')"
                )
            )
            [(got, interrupted, owners)] = (
                await conn.execute(TAKE, {"k": 4242, "t": thread.id, "r": "r-new", "o": "me", "why": "taken over"})
            ).all()
            await conn.execute(text("SELECT pg_advisory_unlock(4242)"))
        assert got and sorted(interrupted) == ["r-plain", "r-running"] and owners == ["dead-1"]
        assert await ProcessPresence(engine, owner="me", lease_seconds=5).sweep() == ["r-queued"]
        rows = {row["run_id"]: row for row in await _outbox(store)}
        assert sorted(rows) == ["r-queued", "r-running"]  # the run without a webhook owes none
        payload = rows["r-running"]["payload"]
        assert (payload["status"], payload["assistant_id"], payload["metadata"]) == ("interrupted", "a1", {"m": 2})
        assert payload["kwargs"] == {"webhook": "https://hooks.example.com/x", "input": {}}
        assert rows["r-running"]["url"] == "https://hooks.example.com/x" and rows["r-queued"]["status"] == "pending"
        await store.aclose()
    finally:
        await engine.dispose()


async def _four_deliveries(store: HostStore, long_ago: datetime) -> list[str]:
    """Four rows: delivered and failed long ago, delivered just now, and one still pending
    that last failed long ago (due again tomorrow)."""
    await _runs_owing_webhooks(store, 4)
    outbox = Outbox(store.transactions)
    ids = [c.delivery_id for c in sorted(await outbox.claim(datetime.now(UTC), 60, 10), key=lambda c: c.run_id)]
    await outbox.delivered(ids[0], 200, long_ago)
    await outbox.attempt_failed(ids[1], 500, "the receiver answered 500", None, long_ago)
    await outbox.delivered(ids[2], 204, datetime.now(UTC))
    await outbox.attempt_failed(ids[3], None, "ConnectError", datetime.now(UTC) + timedelta(days=1), long_ago)
    return ids


async def test_settled_rows_are_pruned_once_kept_long_enough_and_pending_ones_never(store: HostStore) -> None:
    long_ago = datetime.now(UTC) - timedelta(days=10)
    ids = await _four_deliveries(store, long_ago)
    outbox = Outbox(store.transactions)
    assert await outbox.prune_settled(long_ago - timedelta(seconds=1), batch=1) == 0
    assert await outbox.prune_settled(datetime.now(UTC) - timedelta(days=7), batch=1) == 2  # one a transaction
    assert sorted(row["delivery_id"] for row in await _outbox(store)) == sorted(ids[2:])
    assert await outbox.counts() == {"pending": 1, "delivered": 1, "failed": 0}


async def test_the_service_prunes_at_start_by_keep_settled_days(store: HostStore) -> None:
    from deerflow_ext.config.webhooks_config import WebhooksConfig
    from deerflow_ext.webhooks import WebhookService

    ids = await _four_deliveries(store, datetime.now(UTC) - timedelta(days=3))
    kept = WebhookService(WebhooksConfig(keep_settled_days=4), store.transactions, {})
    await kept.start()
    await kept.stop()
    assert len(await _outbox(store)) == 4
    service = WebhookService(WebhooksConfig(keep_settled_days=2), store.transactions, {})
    await service.start()
    try:
        assert sorted(row["delivery_id"] for row in await _outbox(store)) == sorted(ids[2:])
        assert service.pruner.interval == 3600
    finally:
        await service.stop()
