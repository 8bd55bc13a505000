"""What each extension's hooks cost: calls, failures, time, budget overruns, cancellations.

Kept here as plain counters per ``(extension, hook)``, and exposed in Prometheus format by
the Gateway (``GET /metrics``, ``runtime/prometheus_metrics.py``) through a custom prometheus-client
collector that reads them at scrape time. So the hot paths never touch prometheus-client's
locks and label lookups: a hook call costs an attribute increment or two.

Where the counters are kept:

* middleware hooks (``isolation.py``): every call is counted and timed; a wrap hook's time is
  its own, the downstream model or tool call it wraps excluded;
* notifications (``notify.py``: lifecycle hooks, system-model and compaction observers):
  these are the one place where even that is too dear — a no-op lifecycle hook costs ~70 ns,
  a clock read ~40 ns. Each notification plan carries a :class:`NotificationMeter`: every
  notification bumps one counter (the per-contributor call counts are derived from it
  when read), and per-contributor time is *measured* on every notification while a plan is
  young (its first ``WARMUP`` notifications) or expensive (a measured notification took
  ``SLOW_SECONDS`` or more), and on every ``STRIDE``-th otherwise, scaled by ``STRIDE``.
  A hook that costs anything worth knowing is therefore timed on every call; only hooks too
  cheap to matter are sampled. Failures, overruns, skips and cancellations are always
  counted exactly (they are rare paths).

``DEERFLOW_METRICS=0`` switches it off (no meters, no counting; ``serve`` and ``run`` apply it
at startup through :func:`set_metrics_enabled`): the benchmarks compare both.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = [
    "SLOW_SECONDS",
    "STRIDE",
    "WARMUP",
    "HookStats",
    "NotificationMeter",
    "call_stats",
    "count_call",
    "count_skip",
    "hook_label",
    "hook_stats",
    "meter_for",
    "metrics_enabled",
    "set_metrics_enabled",
    "snapshot",
    "stats_table",
]

STRIDE = 256
WARMUP = 16
SLOW_SECONDS = 0.0005  # a notification this slow is timed on every call from then on


class HookStats:
    """Counters for one ``(extension, hook)``; mutated in place by the call sites."""

    __slots__ = ("calls", "cancellations", "extension", "failures", "hook", "overruns", "seconds", "skips")

    def __init__(self, extension: str, hook: str) -> None:
        self.extension = extension
        self.hook = hook
        self.calls = 0
        self.failures = 0
        self.seconds = 0.0
        self.overruns = 0
        self.skips = 0
        self.cancellations = 0

    def __repr__(self) -> str:
        return (
            f"HookStats({self.extension!r}, {self.hook!r}, calls={self.calls}, failures={self.failures}, "
            f"seconds={self.seconds:.6f}, overruns={self.overruns}, skips={self.skips}, "
            f"cancellations={self.cancellations})"
        )


# On unless switched off: `serve` and `run` apply DEERFLOW_METRICS (Settings.metrics) at startup.
_enabled = True
_stats: dict[tuple[str, str], HookStats] = {}
_tables: dict[tuple[str, frozenset[str]], Mapping[str, HookStats]] = {}
_lock = threading.Lock()
_meters: weakref.WeakSet[NotificationMeter] = weakref.WeakSet()
_NO_STATS: Mapping[str, HookStats] = MappingProxyType({})


def metrics_enabled() -> bool:
    return _enabled


def set_metrics_enabled(enabled: bool) -> None:
    """Switch the counting on or off (benchmarks and tests; the Gateway reads the variable)."""
    global _enabled
    _enabled = enabled


def hook_stats(extension: str, hook: str) -> HookStats:
    """The counters of ``(extension, hook)``, created on first use."""
    key = (extension, hook)
    stats = _stats.get(key)
    if stats is None:
        with _lock:
            stats = _stats.setdefault(key, HookStats(extension, hook))
    return stats


def stats_table(extension: str, hooks: frozenset[str]) -> Mapping[str, HookStats]:
    """The counters of each of ``hooks`` for ``extension``, by hook name (a wrapper's table);
    an empty table while metrics are off.

    The same read-only table for the same extension and hooks: every construction wraps each
    contributed middleware anew, and building its table was a quarter of making the wrapper.
    """
    if not _enabled:
        return _NO_STATS
    key = (extension, hooks)
    table = _tables.get(key)
    if table is None:
        table = MappingProxyType({hook: hook_stats(extension, hook_label(hook)) for hook in hooks})
        with _lock:
            table = _tables.setdefault(key, table)
    return table


class NotificationMeter:
    """One notification plan's meter; see the module docstring for the sampling rule.

    The notification path only decrements ``left``; when it reaches zero that notification is
    measured (:meth:`timed`), which also closes the current *period* of ``period``
    notifications. ``done`` counts notifications in closed periods, ``flushed`` how many of
    them are already in the contributors' ``calls``.
    """

    __slots__ = ("__weakref__", "done", "elapsed", "flushed", "left", "period", "stats", "timing")

    def __init__(self, stats: tuple[HookStats, ...]) -> None:
        self.stats = stats
        self.elapsed = [0.0] * len(stats)
        self.timing: tuple[Any, ...] | None = None  # the plan's timed calls, built on first use
        self.done = 0
        self.flushed = 0
        self.period = 1
        self.left = 1

    @property
    def count(self) -> int:
        """Notifications so far, the current period's included."""
        return self.done + (self.period - self.left)

    def flush(self) -> None:
        """Move the notifications counted since the last flush into each contributor's calls.

        A contributor the budget skipped is taken off its ``calls`` where the skip is
        reported (:func:`count_skip`), so ``calls`` stays exact.
        """
        count = self.count
        pending = count - self.flushed
        if pending:
            self.flushed = count
            for stats in self.stats:
                stats.calls += pending

    def timed(self, elapsed: Sequence[float]) -> None:
        """Record the measured notification that closes a period; choose the next period."""
        scale = self.period
        total = 0.0
        for stats, seconds in zip(self.stats, elapsed, strict=False):
            stats.seconds += seconds * scale
            total += seconds
        self.done += self.period
        self.period = 1 if total >= SLOW_SECONDS or self.done < WARMUP else STRIDE
        self.left = self.period
        self.flush()


def call_stats(extension: str, hook: str) -> HookStats | None:
    """The counters a synchronous call site (once per construction or start) times one call
    of ``hook`` into, with :func:`count_call`; None when metrics are off.

    Speed: the call site keeps the clock reading itself instead of an object per call (an
    object and its method cost twice as much, for every contribution of every construction).
    """
    if not _enabled:
        return None
    stats = _stats.get((extension, hook))
    return hook_stats(extension, hook) if stats is None else stats


def count_call(stats: HookStats | None, started: float, failure: BaseException | None = None) -> None:
    """One call that started at ``started`` (``time.perf_counter``) and ended now, and its
    failure if it raised one (a ``CancelledError`` it raised itself is also a cancellation)."""
    if stats is None:
        return
    stats.calls += 1
    stats.seconds += time.perf_counter() - started
    if failure is not None:
        stats.failures += 1
        if isinstance(failure, asyncio.CancelledError):
            stats.cancellations += 1


def hook_label(hook: str) -> str:
    """The label a hook's two sides share: ``awrap_model_call`` counts as ``wrap_model_call``."""
    return _LABELS.get(hook, hook)


_LABELS = {
    "abefore_agent": "before_agent",
    "abefore_model": "before_model",
    "aafter_model": "after_model",
    "aafter_agent": "after_agent",
    "awrap_model_call": "wrap_model_call",
    "awrap_tool_call": "wrap_tool_call",
}


def count_skip(stats: HookStats) -> None:
    """A contributor the budget skipped: counted, and not a call (see :meth:`NotificationMeter.flush`)."""
    stats.skips += 1
    stats.calls -= 1


def meter_for(extensions: Sequence[str], hook: str) -> NotificationMeter | None:
    """A meter over the contributors ``extensions`` (attributions, in call order); None when off."""
    if not _enabled:
        return None
    meter = NotificationMeter(tuple(hook_stats(extension, hook) for extension in extensions))
    with _lock:
        _meters.add(meter)
    return meter


def snapshot() -> Iterator[HookStats]:
    """Every counter, with pending notification counts flushed first (read at scrape time)."""
    with _lock:
        meters = list(_meters)
        stats = list(_stats.values())
    for meter in meters:
        meter.flush()
    yield from stats


def reset_for_tests() -> None:
    """Forget every counter (tests only: the process's counters are otherwise monotonic)."""
    with _lock:
        _stats.clear()
        _tables.clear()
        _meters.clear()
