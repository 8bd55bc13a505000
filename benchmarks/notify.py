"""What the fail-open rules cost on the fast path: ``_notify_each`` vs a bare await loop.

Run: ``PYTHONPATH=src python benchmarks/notify.py``. Not a test: timings are machine
dependent, so this prints the ratios instead of asserting them. The target is
``_notify_each`` over 10 no-op contributors at most 1.5x a bare
``for c in cs: await c.on_task_start(...)`` loop, measured side by side in one run.

Three loops are timed over 1, 10 and 100 contributors that complete without suspending:

* ``bare``   — the loop the host would write with no rules at all;
* ``notify`` — ``_notify_each`` with the default 3 s budget (ordering, isolation, budget,
  cancellation by origin);
* ``pluggy`` — ``pm.hook.on_task_start()`` over the same number of *sync* hookimpls, for
  scale: what pluggy's own (sync, stop-at-first-error, LIFO) call costs;
* ``off``    — ``_notify_each`` with the per-extension metrics switched off
  (``DEERFLOW_METRICS=0``), so ``notify/off`` is what the ``/metrics`` counting costs.

Two kinds of contributor are timed. ``no-op`` hooks have no suspension point (a hook that
only writes to its stores is like this), so ``_notify_each`` takes its fast path: nothing can
interrupt such a hook or deliver a cancellation into it, so the budget timer and the
origin bookkeeping are skipped (``notify_plans._cannot_suspend``). ``awaiting`` hooks contain an
``await`` (of a coroutine that returns at once, so they never actually suspend), which puts
the notification on the full path; their bare loop awaits the same hooks. The issue's target
is the no-op row at 10; the awaiting rows show what the full machinery costs.

Each figure is the best of several repeats of many iterations (``time.perf_counter``), so
scheduler noise inflates no ratio; the three are interleaved within each repeat so that
frequency scaling affects them alike.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pluggy

from deerflow_ext.extensions.contract.snapshot import Contribution
from deerflow_ext.extensions.notifications.notify_plans import _notify_each
from deerflow_ext.extensions.operator_view import hook_metrics
from deerflow_extension_api import ExtensionData, TaskInfo

SIZES = (1, 10, 100)
REPEATS = 15
CALLS_PER_REPEAT = 20_000  # contributor calls per repeat, split over iterations

hookspec = pluggy.HookspecMarker("bench")
hookimpl = pluggy.HookimplMarker("bench")


class Spec:
    @hookspec
    def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        """The lifecycle hook, sync, for pluggy."""


class NoOp:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None


async def _returns() -> None:
    return None


class Awaiting:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        await _returns()


class SyncNoOp:
    @hookimpl
    def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None


async def _time(make: Callable[[], Awaitable[None]] | None, call: Callable[[], object] | None, n: int) -> float:
    """Seconds per notification, best of REPEATS."""
    iterations = max(CALLS_PER_REPEAT // n, 200)
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        if make is not None:
            for _ in range(iterations):
                await make()
        else:
            assert call is not None
            for _ in range(iterations):
                call()
        best = min(best, time.perf_counter() - start)
        await asyncio.sleep(0)  # let the loop run its housekeeping between repeats
    return best / iterations


async def main() -> None:
    app_store, task_store = ExtensionData("app"), ExtensionData("task")
    info = TaskInfo(task_id="t-1", run_id="r-1", thread_id=None, kind="lead")
    args = (app_store, task_store, info)
    print(f"python {sys.version.split()[0]}; best of {REPEATS}; microseconds per notification")
    print(
        f"{'hooks':>8} {'n':>4} {'bare':>9} {'notify':>9} {'off':>9} {'pluggy':>9} "
        f"{'notify/bare':>12} {'off/bare':>9} {'notify/off':>11} {'pluggy/bare':>12}"
    )
    for kind, n in [("no-op", n) for n in SIZES] + [("awaiting", n) for n in SIZES]:
        objects: list[Any] = [(NoOp if kind == "no-op" else Awaiting)() for _ in range(n)]
        contributions = tuple(
            Contribution(f"bench_{i}:install", f"b{i}", i, f"{i}:bench_{i}:install#1", obj)
            for i, obj in enumerate(objects)
        )
        unmetered = tuple(
            Contribution(f"bench_{i}:install", f"b{i}", i, f"{i}:bench_{i}:install#1", obj)
            for i, obj in enumerate(objects)
        )
        # Plans (and their meters) are built on first use: build the unmetered one now.
        hook_metrics.set_metrics_enabled(False)
        await _notify_each(unmetered, "on_task_start", args, task_id="t-1")
        hook_metrics.set_metrics_enabled(True)
        pm = pluggy.PluginManager("bench")
        pm.add_hookspecs(Spec)
        for i in range(n):
            pm.register(SyncNoOp(), name=f"p{i}")

        async def bare(objects: list[Any] = objects) -> None:
            for c in objects:
                await c.on_task_start(app_store, task_store, info)

        def notify(contributions: tuple[Contribution[Any], ...] = contributions) -> Awaitable[None]:
            return _notify_each(contributions, "on_task_start", args, task_id="t-1")

        def off(contributions: tuple[Contribution[Any], ...] = unmetered) -> Awaitable[None]:
            return _notify_each(contributions, "on_task_start", args, task_id="t-1")

        def hook(pm: pluggy.PluginManager = pm) -> object:
            return pm.hook.on_task_start(app_store=app_store, task_store=task_store, info=info)

        results = dict.fromkeys(("bare", "notify", "off", "pluggy"), float("inf"))
        for _ in range(3):  # interleave the four so drift affects them alike
            results["bare"] = min(results["bare"], await _time(bare, None, n))
            results["notify"] = min(results["notify"], await _time(notify, None, n))
            results["off"] = min(results["off"], await _time(off, None, n))
            results["pluggy"] = min(results["pluggy"], await _time(None, hook, n))
        us = {k: v * 1e6 for k, v in results.items()}
        print(
            f"{kind:>8} {n:>4} {us['bare']:>9.3f} {us['notify']:>9.3f} {us['off']:>9.3f} {us['pluggy']:>9.3f} "
            f"{us['notify'] / us['bare']:>11.2f}x {us['off'] / us['bare']:>8.2f}x "
            f"{us['notify'] / us['off']:>10.2f}x {us['pluggy'] / us['bare']:>11.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
