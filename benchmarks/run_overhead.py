"""What extensions cost a lead run: 0 extensions vs 10 no-op extensions of every kind vs 10
extensions that register only routers and services.

Run: ``PYTHONPATH=src python benchmarks/run_overhead.py [--runs N] [--repeats R]``. Not a test:
it prints per-run times and the ratios, measured side by side in one process.

Each run is a real lead run on the embedded model through ``DeerFlowClient`` (task store,
``on_task_start``/``on_task_stop``, agent construction with the composed middleware stack,
title generation as a system call, assembly observation), each on a fresh thread in every arm
(the same thread-reuse policy everywhere), memory off (its debounced background extraction
would add noise, not extension cost). The arms are interleaved within each repeat so drift
(frequency scaling, a noisy neighbour) hits them alike; each figure is the median of the
repeats' per-run means, with the best shown too.

Targets: every-kind <= 1.10x the bare run; routers/services 1.00x (within noise),
because the spec says an extension that registers only services, routers or assembly
observers costs a run nothing (no task store, no notifications).

A fourth arm runs the every-kind extensions with the per-extension hook metrics switched
off (``DEERFLOW_METRICS=0``, what ``GET /metrics`` reads): ``every-kind x10`` minus it is
what that instrumentation costs a run.

``--gc`` also reports, per arm, the time spent in the cyclic garbage collector and its
collections per run (``gc.callbacks``): objects an arm keeps alive through a run, or leaves
in reference cycles, bring collections sooner, and each one walks the young objects of
every arm alike. Measured 2026-12-03, that was ~40% of what ten extensions added to a run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.client import DeerFlowClient
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.extensions.operator_view import hook_metrics
from deerflow_extension_api import MiddlewarePlacement, Placement

EXTENSIONS = 10


class NoOpMiddleware(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class NoOpContributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(NoOpMiddleware(), Placement.STANDARD)]


class NoOpLifecycle:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        return None


class NoOpObserver:
    async def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> None:
        return None

    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        return None

    async def on_context_compacted(self, app_store: Any, task_store: Any, event: Any) -> None:
        return None


class NoOpService:
    async def start(self, deps: Any) -> None:
        return None

    async def stop(self) -> None:
        return None


def _router(i: int) -> APIRouter:
    router = APIRouter(prefix=f"/bench{i}")

    @router.get("/ping")
    async def ping() -> dict[str, str]:
        return {}

    return router


def _every_kind(registry: Any, i: int) -> None:
    observer = NoOpObserver()
    registry.middlewares(NoOpContributor())
    registry.task_lifecycle(NoOpLifecycle())
    registry.system_model_observer(observer)
    registry.agent_assembly_observer(observer)
    registry.context_compaction_observer(observer)
    registry.service(NoOpService())
    registry.routers([_router(i)])


def _routers_services(registry: Any, i: int) -> None:
    registry.service(NoOpService())
    registry.routers([_router(i)])


def build(install: Any) -> LoadedExtensions:
    """A real frozen snapshot of ``EXTENSIONS`` entries, as the loader would build it."""
    registry = HostRegistry()
    loaded = []
    for i in range(EXTENSIONS):
        use = f"bench_{i}:install"
        registry.begin(i, f"bench{i}", use)
        install(registry, i)
        registry.end()
        loaded.append(use)
    return registry.freeze(loaded=tuple(loaded), total=EXTENSIONS)


UNMETERED = "every-kind, metrics off"


class _Collector:
    """Seconds spent in the cyclic garbage collector, and its collections, since ``reset``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: Mapping[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1

    def reset(self) -> None:
        self.seconds = 0.0
        self.collections = 0


async def _time_runs(client: DeerFlowClient, runs: int, tag: str) -> float:
    hook_metrics.set_metrics_enabled(tag != UNMETERED)
    try:
        start = time.perf_counter()
        for i in range(runs):
            await client.arun(f"tell me about item {i}")  # a fresh thread per run, in every arm
        return (time.perf_counter() - start) / runs
    finally:
        hook_metrics.set_metrics_enabled(True)


async def main(runs: int, repeats: int, collector: _Collector | None = None) -> None:
    config = AppConfig.model_validate({"memory": {"enabled": False}})
    arms: Mapping[str, LoadedExtensions] = {
        "none": LoadedExtensions.empty(),
        "every-kind x10": build(_every_kind),
        "routers+services x10": build(_routers_services),
        UNMETERED: build(_every_kind),  # its own snapshot: notification plans are per snapshot
    }
    clients = {name: DeerFlowClient(config, extensions=ext) for name, ext in arms.items()}
    for name, client in clients.items():  # warm-up: imports, graph caches, first-call paths
        await _time_runs(client, 3, name)
    samples: dict[str, list[float]] = {name: [] for name in arms}
    collected: dict[str, list[float]] = {name: [0.0, 0] for name in arms}  # seconds, collections
    for rep in range(repeats):
        order = list(arms) if rep % 2 == 0 else list(reversed(arms))  # interleaved, alternating order
        for name in order:
            if collector is not None:
                collector.reset()
            samples[name].append(await _time_runs(clients[name], runs, name))
            if collector is not None:
                collected[name][0] += collector.seconds
                collected[name][1] += collector.collections
    for client in clients.values():
        await client.aclose()

    base_median = statistics.median(samples["none"])
    base_best = min(samples["none"])
    noise = (max(samples["none"]) - min(samples["none"])) / base_median
    print(f"python {sys.version.split()[0]}; {repeats} interleaved repeats x {runs} runs; ms per lead run")
    # extra ms: the extensions' absolute cost per run (median minus the bare median); the
    # ratio alone moves whenever the bare run itself gets faster or slower.
    print(f"{'arm':<24}{'median':>9}{'best':>9}{'median/none':>13}{'best/none':>11}{'extra ms':>10}")
    for name, values in samples.items():
        med, best = statistics.median(values), min(values)
        print(
            f"{name:<24}{med * 1e3:>9.2f}{best * 1e3:>9.2f}{med / base_median:>13.3f}{best / base_best:>11.3f}"
            f"{(med - base_median) * 1e3:>10.2f}"
        )
    print(f"noise: spread of the bare arm's repeats = {noise * 100:.1f}% of its median")
    metered, unmetered = statistics.median(samples["every-kind x10"]), statistics.median(samples[UNMETERED])
    print(
        f"hook metrics (every-kind x10 vs {UNMETERED}): {(metered - unmetered) * 1e3:+.3f} ms per run, "
        f"{metered / unmetered:.3f}x"
    )
    if collector is not None:
        done = runs * repeats
        for name, (seconds, count) in collected.items():
            per_run = seconds / done * 1e3
            print(f"gc {name:<24}{per_run:>7.3f} ms per run in the collector, {count / done:.2f} collections")
    print("targets: every-kind x10 <= 1.10x; routers+services x10 1.00x within noise")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per arm per repeat")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--gc", action="store_true", help="also report the garbage collector's time per arm")
    args = parser.parse_args()
    collector = _Collector() if args.gc else None
    if collector is not None:
        gc.callbacks.append(collector)
    asyncio.run(main(args.runs, args.repeats, collector))
