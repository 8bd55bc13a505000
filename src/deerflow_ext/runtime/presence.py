"""Which Gateway processes are alive: one heartbeat row each, failing the queued runs of the dead.

A run is ``pending`` from the moment its process persists it until that process holds its
thread. If the process dies in that window, nothing else can tell: a takeover and the
coordinator's sweeper start from runs left *running*, and if this process left none, neither
ever looks at this run. It used to stay ``pending`` until its host restarted (startup recovery
only knows the pids of its own host).

So every process sharing PostgreSQL keeps a row in ``gateway_processes`` whose ``expires_at``
it pushes forward every ``lease/3`` seconds, on the database's clock.
Every ``lease/2`` seconds each process fails the ``pending`` runs of owners whose row has
expired — ``interrupted``/``aborted``, never started, so no hooks — and forgets rows long
expired. Bound: a dead process's queued runs are failed within lease + lease/2.

Why fail and not adopt: the run's caller and its snapshot of extensions lived in the dead
process (and, without Redis, its stream); another process running it could answer nobody and
run a different set of extensions. The client sees a terminal run and may send it again.

A process that was only frozen and comes back finds its queued runs ended: starting a run is
conditional on it still being ``pending`` (``HostStore.mark_started``), so it never runs a
run that another process has already failed. Its own row is written again on the next beat.
Runs that *started* are the thread holds' (``pg_coordinator``), which read the same rows: a
waiter ends the lock session of a process whose row expired, and a take or the sweeper
interrupts what such a process left running.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import text

from ..background_task import stop_task
from ..persistence.models import RunStatus
from ..persistence.records.pg_statements import OWED_RETURNING, interrupt_runs, owed_webhooks, status_is

__all__ = ["ProcessPresence"]

logger = logging.getLogger("deerflow_ext.runtime")

_BEAT = text(
    "INSERT INTO gateway_processes (owner, started_at, heartbeat_at, expires_at) "
    "VALUES (:o, clock_timestamp(), clock_timestamp(), clock_timestamp() + make_interval(secs => :s)) "
    "ON CONFLICT (owner) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, expires_at = EXCLUDED.expires_at"
)
_FAILED = interrupt_runs(
    f"{status_is(RunStatus.PENDING)} AND owner <> :me AND owner IN "
    "(SELECT owner FROM gateway_processes WHERE expires_at < clock_timestamp())",
    returning=f"owner, {OWED_RETURNING}",
)
# The failed runs' webhooks owed in the same statement (``owed_webhooks``).
_FAIL_QUEUED = text(f"WITH failed AS ({_FAILED}), owed AS ({owed_webhooks('failed')}) SELECT id, owner FROM failed")
_WHY = "the process that queued it stopped before it started (no heartbeat within the lease)"
# Rows expired this long ago have been swept many times over: forget them.
_FORGET = text("DELETE FROM gateway_processes WHERE expires_at < clock_timestamp() - make_interval(secs => :keep)")
_LEAVE = text("DELETE FROM gateway_processes WHERE owner = :o")


class ProcessPresence:
    """This process's heartbeat, and the sweep of dead processes' queued runs."""

    def __init__(self, engine: Any, *, owner: str, lease_seconds: float) -> None:
        self._engine = engine
        self.owner = owner
        self.lease_seconds = lease_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Write the first heartbeat (before any run of ours exists), then keep beating."""
        await self.beat()
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name="deerflow-process-heartbeat")

    async def beat(self) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(_BEAT, {"o": self.owner, "s": self.lease_seconds})

    async def sweep(self) -> list[str]:
        """Fail the queued runs of processes whose heartbeat expired; returns their ids."""
        async with self._engine.begin() as conn:
            failed = (await conn.execute(_FAIL_QUEUED, {"me": self.owner, "why": _WHY})).all()
            await conn.execute(_FORGET, {"keep": 10 * self.lease_seconds})
        for run_id, owner in failed:
            logger.warning("run %s failed: %s stopped before starting it (no heartbeat in the lease)", run_id, owner)
        return [run_id for run_id, _ in failed]

    async def _forever(self) -> None:
        beat_every, sweep_every = self.lease_seconds / 3, self.lease_seconds / 2
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + sweep_every
        while True:
            await asyncio.sleep(min(beat_every, max(0.0, next_sweep - loop.time())))
            try:
                await self.beat()
                if loop.time() >= next_sweep:
                    next_sweep = loop.time() + sweep_every
                    await self.sweep()
            except Exception:
                logger.exception("process heartbeat failed; retrying")

    async def aclose(self) -> None:
        """Stop beating and leave: our own queued runs were drained by now."""
        await stop_task(self._task)
        self._task = None
        try:
            async with self._engine.begin() as conn:
                await conn.execute(_LEAVE, {"o": self.owner})
        except Exception:
            logger.exception("could not remove this process's heartbeat row")
