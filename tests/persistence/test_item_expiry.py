"""``store.ttl`` on ``ItemStore``: ``default_ttl`` for a put that names none,
``refresh_on_read`` for a read that does not say, and the sweep in bounded batches, on a
real database (SQLite, and PostgreSQL when reachable)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from deerflow_ext.persistence import STORE_ITEMS
from deerflow_ext.persistence import item_store as item_store_module
from deerflow_ext.persistence.item_store import ItemStore


async def _expires_at(engine: sa.ext.asyncio.AsyncEngine, key: str) -> datetime | None:
    async with engine.connect() as conn:
        found = (await conn.execute(sa.select(STORE_ITEMS.c.expires_at).where(STORE_ITEMS.c.key == key))).scalar()
    return None if found is None else found.replace(tzinfo=found.tzinfo or UTC)


async def test_default_ttl_and_refresh_on_read_are_what_a_call_that_does_not_say_gets(
    engine: sa.ext.asyncio.AsyncEngine,
) -> None:
    store = ItemStore(engine, ttl_config={"default_ttl": 30.0, "refresh_on_read": False})
    try:
        assert store.default_ttl() == 30.0 and store.refresh_on_read() is False
        await store.aput(("t",), "defaulted", {"v": 1})  # no ttl: the default's
        await store.aput(("t",), "kept", {"v": 2}, ttl=None)  # an explicit None: no expiry
        deadline = await _expires_at(engine, "defaulted")
        assert deadline is not None and timedelta(minutes=29) < deadline - datetime.now(UTC) <= timedelta(minutes=30)
        assert await _expires_at(engine, "kept") is None

        assert await store.aget(("t",), "defaulted") is not None  # refresh_on_read: false
        assert await _expires_at(engine, "defaulted") == deadline
        assert await store.aget(("t",), "defaulted", refresh_ttl=True) is not None  # a read that says
        refreshed = await _expires_at(engine, "defaulted")
        assert refreshed is not None and refreshed > deadline
    finally:
        await store.aclose()


async def test_the_sweep_deletes_every_expired_item_in_bounded_batches_and_nothing_else(
    engine: sa.ext.asyncio.AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(item_store_module, "SWEEP_BATCH", 3)
    store = ItemStore(engine)
    try:
        for n in range(8):
            await store.aput(("old",), f"k{n}", {"n": n}, ttl=5.0)
        await store.aput(("young",), "k", {"n": 0}, ttl=5.0)
        await store.aput(("forever",), "k", {"n": 0})
        async with engine.begin() as conn:
            past = datetime.now(UTC) - timedelta(minutes=1)
            await conn.execute(sa.update(STORE_ITEMS).where(STORE_ITEMS.c.prefix == "old").values(expires_at=past))
        assert await store.sweep_expired() == 8  # batches of 3, 3 and 2
        assert await store.sweep_expired() == 0
        async with engine.connect() as conn:
            left = (await conn.execute(sa.select(STORE_ITEMS.c.prefix).order_by(STORE_ITEMS.c.prefix))).scalars()
            assert list(left) == ["forever", "young"]
    finally:
        await store.aclose()
