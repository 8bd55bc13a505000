"""Expiry: threads and store items that outlive their time to live are deleted.

This package owns LangGraph's time to live as ``langgraph.json`` configures it
(``checkpointer.ttl``, ``store.ttl``: ``config.ttl``) and as clients set it (a thread's
``ttl`` on ``threads.create``/``threads.update``, an item's on ``store.put_item``), and the
work that follows from it:

- ``thread_rows``: arming a thread's time to live and taking the expired threads (or those a
  prune names) in one transaction each, one process per row (``FOR UPDATE SKIP LOCKED``);
- ``threads``: :class:`ThreadExpiry`, the one deletion path of the TTL sweep and of
  ``POST /threads/prune`` (rows, then checkpoints through LangGraph's ``prune``);
- :class:`Expiry` (here): the Gateway's two sweepers (``background_task.Sweeper``), threads
  and store items, built from the configuration.

Decisions where LangGraph says little (README, "Threads and store items expire"): a
thread's time to live counts from its last activity (a run, an update); a thread with a run
pending or running is never deleted or pruned from under it, by a sweep or a prune (the sweep
looks again a ``ttl`` later; a prune leaves it out of its count); ``keep_latest`` prunes a
thread again only after another ``ttl``.
"""

from __future__ import annotations

from typing import Any

from langgraph.store.base import TTLConfig

from ..background_task import Sweeper
from ..config.schema import StoreConfig
from ..config.ttl import CheckpointerConfig
from ..persistence.records import ThreadTTL
from ..persistence.transactions import Transactions
from .thread_rows import Taken
from .threads import ThreadExpiry

__all__ = ["Expiry", "Taken", "ThreadExpiry", "default_thread_ttl", "store_ttl_config"]


def default_thread_ttl(config: CheckpointerConfig) -> ThreadTTL | None:
    """The time to live a thread created without one gets (``checkpointer.ttl.default_ttl``)."""
    ttl = config.ttl
    return None if ttl.default_ttl is None else ThreadTTL(ttl.strategy, ttl.default_ttl)


def store_ttl_config(config: StoreConfig) -> TTLConfig:
    """``store.ttl`` as LangGraph's ``TTLConfig`` (what ``ItemStore`` takes: its defaults;
    the sweep's interval is :class:`Expiry`'s)."""
    ttl = config.ttl
    return {"default_ttl": ttl.default_ttl, "refresh_on_read": ttl.refresh_on_read}


class Expiry:
    """The Gateway's sweeps: expired threads every ``checkpointer.ttl.sweep_interval_minutes``,
    expired store items every ``store.ttl.sweep_interval_minutes``.

    ``threads`` is also what the thread routes use (a client's ``ttl``, ``threads.prune``);
    ``items`` the store (``persistence.item_store.ItemStore``) or None."""

    def __init__(
        self,
        transactions: Transactions,
        checkpointer: Any,
        items: Any,
        *,
        checkpointer_config: CheckpointerConfig,
        store_config: StoreConfig,
    ) -> None:
        ttl = checkpointer_config.ttl
        self.threads = ThreadExpiry(transactions, checkpointer, strategy=ttl.strategy, limit=ttl.sweep_limit)
        self.thread_sweeper = Sweeper("thread TTL", self.threads.sweep, ttl.sweep_interval_minutes * 60)
        self.item_sweeper: Sweeper | None = None
        if items is not None:
            self.item_sweeper = Sweeper("store TTL", items.sweep_expired, store_config.ttl.sweep_interval_minutes * 60)

    def start(self) -> None:
        self.thread_sweeper.start()
        if self.item_sweeper is not None:
            self.item_sweeper.start()

    async def stop(self) -> None:
        await self.thread_sweeper.stop()
        if self.item_sweeper is not None:
            await self.item_sweeper.stop()
