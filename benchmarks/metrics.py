"""What the ``/metrics`` instrumentation costs per hook call, and what one scrape costs.

Run: ``PYTHONPATH=src python benchmarks/metrics.py``. Not a test: it prints nanoseconds per
call, side by side with the instrumentation switched off (``DEERFLOW_METRICS=0``), measured
in one process, interleaved, best of several repeats.

* ``wrap hook`` — one ``awrap_model_call`` of a contributed no-op middleware through
  ``IsolatedMiddleware`` (isolation, attribution, and with metrics on: its call count and
  its own time, the downstream call's excluded);
* ``state hook`` — one ``abefore_model`` of a contributed no-op middleware;
* ``notification`` — ``_notify_each`` over 10 no-op lifecycle contributors, per contributor
  (the sampled meter of ``extensions/operator_view/hook_metrics.py``; ``notify.py`` has the full table);
* ``scrape`` — rendering ``/metrics`` with 100 extensions x 6 hooks of counters.

The run-level figure (a whole lead run with ten extensions of every kind, metrics on and
off) is ``run_overhead.py``'s last line.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage

from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware
from deerflow_ext.extensions.contract.snapshot import Contribution
from deerflow_ext.extensions.notifications.notify_plans import _notify_each
from deerflow_ext.extensions.operator_view import hook_metrics
from deerflow_ext.runtime import prometheus_metrics as run_metrics
from deerflow_extension_api import ExtensionData, TaskInfo

REPEATS = 7
CALLS = 20_000


class NoOp(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        return None


class Lifecycle:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None


_REPLY = AIMessage(content="ok")


async def _handler(request: Any) -> Any:
    return _REPLY


async def _best(call: Callable[[], Awaitable[Any]], per: int = 1) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(CALLS):
            await call()
        best = min(best, (time.perf_counter() - start) / CALLS / per)
        await asyncio.sleep(0)
    return best * 1e9


def _arms() -> dict[str, dict[str, Callable[[], Awaitable[Any]]]]:
    arms: dict[str, dict[str, Callable[[], Awaitable[Any]]]] = {}
    args = (ExtensionData("app"), ExtensionData("task"), TaskInfo(task_id="t", run_id="r", thread_id=None, kind="lead"))
    for label, enabled in (("on", True), ("off", False)):
        hook_metrics.set_metrics_enabled(enabled)
        mw = IsolatedMiddleware(NoOp(), extension=f"bench_{label}:install", diagnostics=DiagnosticsList())
        contributions = tuple(
            Contribution(f"bench_{label}_{i}:install", f"b{i}", i, f"{i}:b", Lifecycle()) for i in range(10)
        )
        arms[label] = {
            "wrap hook": lambda mw=mw: mw.awrap_model_call("request", _handler),
            "state hook": lambda mw=mw: mw.abefore_model({}, None),
            "notification": lambda c=contributions: _notify_each(c, "on_task_start", args, task_id="t"),
        }
    hook_metrics.set_metrics_enabled(True)
    return arms


async def main() -> None:
    arms = _arms()
    for label, calls in arms.items():  # build plans and meters under their own switch
        hook_metrics.set_metrics_enabled(label == "on")
        for call in calls.values():
            await call()
    hook_metrics.set_metrics_enabled(True)
    print(f"python {sys.version.split()[0]}; best of {REPEATS} x {CALLS} calls, interleaved; ns per hook call")
    print(f"{'hook':<14}{'metrics on':>12}{'off':>10}{'cost':>10}{'ratio':>8}")
    for name in arms["on"]:
        per = 10 if name == "notification" else 1
        on = off = float("inf")
        for _ in range(3):
            on = min(on, await _best(arms["on"][name], per))
            off = min(off, await _best(arms["off"][name], per))
        print(f"{name:<14}{on:>12.0f}{off:>10.0f}{on - off:>+10.0f}{on / off:>7.2f}x")

    for e in range(100):
        for hook in ("on_task_start", "on_task_stop", "wrap_model_call", "wrap_tool_call", "before_model", "x"):
            hook_metrics.hook_stats(f"scrape_{e}:install", hook).calls += 1
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        body = run_metrics.render()
        best = min(best, time.perf_counter() - start)
    print(f"scrape with 600 (extension, hook) pairs: {best * 1e3:.2f} ms, {len(body) / 1024:.0f} KiB")


if __name__ == "__main__":
    asyncio.run(main())
