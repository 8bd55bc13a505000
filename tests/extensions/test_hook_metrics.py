"""Per-extension hook counters: exact counts, sampled time for cheap hooks, every call for slow ones."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from deerflow_ext.extensions.contract.snapshot import Contribution
from deerflow_ext.extensions.notifications.notify_plans import _notify_each
from deerflow_ext.extensions.operator_view import hook_metrics
from deerflow_extension_api import ExtensionData, TaskInfo

ARGS = (ExtensionData("app"), ExtensionData("task"), TaskInfo(task_id="t", run_id="r", thread_id=None, kind="lead"))


def _contributions(*contributors: Any) -> tuple[tuple[Contribution[Any], ...], list[str]]:
    names = [f"m{uuid.uuid4().hex[:8]}:install" for _ in contributors]
    pairs = enumerate(zip(names, contributors, strict=True))
    return tuple(Contribution(name, f"x{i}", i, f"{i}:{name}#1", c) for i, (name, c) in pairs), names


def _stats(name: str, hook: str = "on_task_start") -> hook_metrics.HookStats:
    list(hook_metrics.snapshot())  # flush pending notification counts, as a scrape does
    return hook_metrics.hook_stats(name, hook)


class Cheap:
    async def on_task_start(self, *args: Any) -> None:
        return None


class Slow:
    async def on_task_start(self, *args: Any) -> None:
        await asyncio.sleep(0.002)


class Raises:
    async def on_task_start(self, *args: Any) -> None:
        raise ValueError("no")


async def test_cheap_hooks_are_counted_exactly_and_their_time_is_sampled() -> None:
    contributions, (a, b) = _contributions(Cheap(), Cheap())
    for _ in range(1000):
        await _notify_each(contributions, "on_task_start", ARGS, task_id="t")
    for name in (a, b):
        stats = _stats(name)
        assert (stats.calls, stats.failures, stats.skips) == (1000, 0, 0)
        assert 0 < stats.seconds < 0.5


async def test_a_slow_hook_is_timed_on_every_call() -> None:
    contributions, (cheap, slow) = _contributions(Cheap(), Slow())
    started = time.perf_counter()
    for _ in range(hook_metrics.WARMUP + 20):
        await _notify_each(contributions, "on_task_start", ARGS, task_id="t")
    elapsed = time.perf_counter() - started
    stats = _stats(slow)
    assert stats.calls == hook_metrics.WARMUP + 20
    # Every call measured (a sampled estimate would be off by up to a whole stride).
    assert (hook_metrics.WARMUP + 20) * 0.002 <= stats.seconds <= elapsed
    assert _stats(cheap).seconds < stats.seconds / 10


async def test_failures_and_budget_overruns_and_skips_are_counted() -> None:
    contributions, (raises, slow, skipped) = _contributions(Raises(), Slow(), Cheap())
    await _notify_each(contributions, "on_task_start", ARGS, task_id="t", budget=0.001)
    assert (_stats(raises).calls, _stats(raises).failures) == (1, 1)
    assert (_stats(slow).calls, _stats(slow).overruns, _stats(slow).cancellations) == (1, 1, 1)
    assert (_stats(skipped).calls, _stats(skipped).skips) == (0, 1)


async def test_switched_off_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook_metrics, "_enabled", False)
    contributions, (name,) = _contributions(Cheap())
    await _notify_each(contributions, "on_task_start", ARGS, task_id="t")
    assert (name, "on_task_start") not in hook_metrics._stats


def test_an_extensions_wrappers_share_one_table_of_its_counters() -> None:
    name = f"m{uuid.uuid4().hex[:8]}:install"
    hooks = frozenset({"awrap_model_call", "wrap_tool_call"})
    table = hook_metrics.stats_table(name, hooks)
    assert hook_metrics.stats_table(name, frozenset(hooks)) is table  # equal hooks, the same table
    assert table["awrap_model_call"] is hook_metrics.hook_stats(name, "wrap_model_call")  # both sides, one label
    assert table["wrap_tool_call"] is hook_metrics.hook_stats(name, "wrap_tool_call")
    with pytest.raises(TypeError):
        table["before_model"] = hook_metrics.hook_stats(name, "before_model")  # type: ignore[index]


class _Contributes:
    def __init__(self, outcome: BaseException | None) -> None:
        self.outcome = outcome

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[Any]:
        if self.outcome is not None:
            raise self.outcome
        return []


def test_construction_calls_are_counted_with_their_failures_and_own_cancellations() -> None:
    """``contribute_middlewares`` and ``on_agent_assembled`` are timed call by call, and a
    failure, or a ``CancelledError`` the extension raised itself, is counted as such."""
    from deerflow_ext.extensions.composition.assembly import emit_agent_assembled
    from deerflow_ext.extensions.composition.stack import compose_middleware_stack
    from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
    from deerflow_extension_api import AgentBuildContext, AgentScope

    outcomes = (None, ValueError("no"), asyncio.CancelledError())
    contributions, names = _contributions(*(_Contributes(outcome) for outcome in outcomes))
    extensions = LoadedExtensions(middlewares=contributions)
    ctx = AgentBuildContext(scope=AgentScope.LEAD, agent_name="lead")
    for _ in range(2):
        compose_middleware_stack([], extensions=extensions, ctx=ctx)
    counts = [
        (stats.calls, stats.failures, stats.cancellations, stats.seconds > 0)
        for stats in (_stats(name, "contribute_middlewares") for name in names)
    ]
    assert counts == [(2, 0, 0, True), (2, 2, 0, True), (2, 2, 2, True)]

    class Observes:
        def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
            raise RuntimeError("observer")

    observers, (observer,) = _contributions(Observes())
    emit_agent_assembled(LoadedExtensions(assembly_observers=observers), lambda: object())  # type: ignore[arg-type,return-value]
    stats = _stats(observer, "on_agent_assembled")
    assert (stats.calls, stats.failures, stats.cancellations) == (1, 1, 0)
