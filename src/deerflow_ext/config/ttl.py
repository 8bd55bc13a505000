"""``checkpointer.ttl`` and ``store.ttl``: how long threads and store items live.

The keys are ``langgraph.json``'s, so a LangGraph user finds the same ones in
``config.yaml``::

    checkpointer:
      ttl: {strategy: delete, default_ttl: 43200, sweep_interval_minutes: 60, sweep_limit: 1000}
    store:
      ttl: {default_ttl: 10080, refresh_on_read: true, sweep_interval_minutes: 120}

Minutes throughout, as LangGraph's. ``default_ttl`` applies to what is created without a
``ttl`` of its own (a thread, a store put) after the configuration is in force; existing rows
keep theirs. Left out, nothing expires unless a client asks for it, and the sweeps still run
every :data:`DEFAULT_SWEEP_MINUTES` minutes for what clients asked (LangGraph's interval), so
a thread or item given a ``ttl`` is deleted, not only hidden. The sweep's own work is what
``deerflow_ext.expiry`` owns.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_SWEEP_LIMIT",
    "DEFAULT_SWEEP_MINUTES",
    "MAX_TTL_MINUTES",
    "CheckpointerConfig",
    "StoreTTLConfig",
    "ThreadStrategy",
    "ThreadTTLConfig",
]

ThreadStrategy = Literal["delete", "keep_latest"]
"""What a thread's expiry does: ``delete`` the thread with its runs, checkpoints and crons;
``keep_latest`` keep the thread and only its newest checkpoint (its state; no history)."""

MAX_TTL_MINUTES = 100 * 366 * 24 * 60
"""The longest time to live anything may have: 100 years, in minutes (a deadline past what a
timestamp holds, year 9999, cannot be stored)."""

DEFAULT_SWEEP_MINUTES = 5.0
"""Minutes between two sweeps when the file names none: LangGraph's thread sweep interval."""

DEFAULT_SWEEP_LIMIT = 1000
"""Threads one sweep expires at most when the file names no ``sweep_limit`` (LangGraph's)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ThreadTTLConfig(_Strict):
    """``checkpointer.ttl``. ``strategy`` is also the default of a client's ``ttl`` that names
    none. ``sweep_limit`` bounds one sweep's threads; the rest wait for the next."""

    strategy: ThreadStrategy = "delete"
    default_ttl: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)
    sweep_interval_minutes: float = Field(default=DEFAULT_SWEEP_MINUTES, gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)
    sweep_limit: int = Field(default=DEFAULT_SWEEP_LIMIT, ge=1, le=1_000_000)


class CheckpointerConfig(_Strict):
    """``checkpointer`` (only its ``ttl``: the saver itself is the Gateway's database's)."""

    ttl: ThreadTTLConfig = Field(default_factory=ThreadTTLConfig)


class StoreTTLConfig(_Strict):
    """``store.ttl``: ``default_ttl`` for a put that names none, ``refresh_on_read`` for a
    get or search that does not say (LangGraph's default: true)."""

    default_ttl: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)
    refresh_on_read: bool = True
    sweep_interval_minutes: float = Field(default=DEFAULT_SWEEP_MINUTES, gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)
