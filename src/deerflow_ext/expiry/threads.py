"""Thread expiry and ``threads.prune``: one deletion path for both.

Taking the threads is the rows' (``thread_rows``: a transaction that locks, checks for live
runs and deletes the rows of ``delete``); what follows is the checkpointer's: the taken
threads' checkpoints go with LangGraph's ``prune`` (``delete``: every checkpoint, write and
blob; ``keep_latest``: all but each namespace's newest), on the saver's thread, never on the
event loop (``threaded_saver.OnThreads.aprune``).

Rows first, then checkpoints, as ``DELETE /threads/{id}`` does: a thread is gone for every
client the moment its transaction commits. A process stopped between the two leaves the
checkpoints of a thread that no longer exists; nothing reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..persistence.models import utcnow
from ..persistence.records import ThreadTTL
from ..persistence.transactions import Transactions
from .thread_rows import Taken, arm_ttl, take_expired, take_for_prune, ttl_of

__all__ = ["BATCH", "ThreadExpiry"]

logger = logging.getLogger("deerflow_ext.expiry")

BATCH = 100
"""Threads one transaction takes at most: a sweep of ``sweep_limit`` threads is several
short transactions, each a bounded lock on a bounded set of rows."""


class ThreadExpiry:
    """Threads' time to live over the host store's transactions and the checkpointer.

    ``strategy``: what a client's ``ttl`` without one does (``checkpointer.ttl.strategy``);
    ``limit``: the threads one sweep takes at most (``sweep_limit``)."""

    def __init__(self, transactions: Transactions, checkpointer: Any, *, strategy: str, limit: int) -> None:
        self._tx = transactions
        self._checkpointer = checkpointer
        self.strategy = strategy
        self.limit = limit

    def ttl(self, minutes: float, strategy: str | None = None) -> ThreadTTL:
        """A client's ``ttl``, its strategy defaulting to the configured one."""
        return ThreadTTL(strategy or self.strategy, minutes)

    async def arm(self, thread_id: str, ttl: ThreadTTL) -> bool:
        """Give a thread ``ttl`` from now (``threads.update``); False when there is none."""
        return await self._tx.write(arm_ttl, thread_id, ttl, utcnow())

    async def ttl_of(self, thread_id: str) -> dict[str, Any] | None:
        return await self._tx.read(ttl_of, thread_id)

    async def prune(self, thread_ids: Sequence[str], strategy: str) -> int:
        """LangGraph's ``threads.prune``: how many threads were pruned (a thread that does
        not exist or runs a run is not, and is not counted)."""
        taken: Taken = await self._tx.write_aside(take_for_prune, list(thread_ids), strategy)
        await self._prune_checkpoints(taken)
        return len(taken)

    async def sweep(self) -> Taken:
        """One sweep: up to :attr:`limit` expired threads looked at (LangGraph's
        ``sweep_limit``), :data:`BATCH` per transaction, each batch's checkpoints pruned
        before the next is taken; it ends early at a batch that finds fewer than it asked."""
        deleted: list[str] = []
        kept: list[str] = []
        examined = 0
        while examined < self.limit:
            want = min(BATCH, self.limit - examined)
            taken: Taken = await self._tx.write_aside(take_expired, utcnow(), want)
            await self._prune_checkpoints(taken)
            deleted += taken.deleted
            kept += taken.kept
            examined += taken.examined
            if taken.examined < want:
                break
        if deleted or kept:
            logger.info(
                "thread TTL sweep: deleted %d thread(s), pruned %d to their latest state", len(deleted), len(kept)
            )
        return Taken(tuple(deleted), tuple(kept), examined)

    async def _prune_checkpoints(self, taken: Taken) -> None:
        if self._checkpointer is None:
            return
        for strategy, ids in (("delete", taken.deleted), ("keep_latest", taken.kept)):
            if ids:
                await self._checkpointer.aprune(list(ids), strategy=strategy)
