"""The Gateway's Prometheus metrics: runs by outcome and latency, and each extension's hooks.

One ``prometheus_client.CollectorRegistry`` per process (not the library's global default,
so an embedding application's own metrics never mix with ours). Run counters are ordinary
prometheus-client metrics, updated once per run. The per-extension hook counters live in
``extensions.operator_view.hook_metrics`` as plain attributes (the hot paths cannot afford prometheus-client's
locks) and are read by :class:`ExtensionHookCollector` at scrape time — the custom-collector
pattern prometheus-client documents for exactly this.

Answering "which extension costs my runs how much": ``deerflow_extension_hook_seconds_total``
by ``extension`` (and ``hook``) against ``deerflow_run_duration_seconds_sum``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from ..extensions.operator_view import hook_metrics

__all__ = ["CONTENT_TYPE", "REGISTRY", "ExtensionHookCollector", "record_run", "render"]

REGISTRY = CollectorRegistry()
CONTENT_TYPE = CONTENT_TYPE_LATEST

_RUNS = Counter("deerflow_runs", "Lead runs that ended, by outcome.", ["outcome"], registry=REGISTRY)
_RUN_SECONDS = Histogram(
    "deerflow_run_duration_seconds",
    "Lead run latency from admission to the end of on_task_stop, by outcome.",
    ["outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)

_FAMILIES = (
    ("calls", "deerflow_extension_hook_calls", "Calls of an extension's hook."),
    ("failures", "deerflow_extension_hook_failures", "Calls that raised (contained, attributed)."),
    (
        "seconds",
        "deerflow_extension_hook_seconds",
        "Time spent in an extension's hook (a wrap hook's downstream call excluded; cheap "
        "notification hooks are sampled and scaled, see extensions/operator_view/hook_metrics.py).",
    ),
    ("overruns", "deerflow_extension_hook_budget_overruns", "Calls cancelled by the notification budget."),
    ("skips", "deerflow_extension_hook_budget_skips", "Calls skipped because the budget was already spent."),
    ("cancellations", "deerflow_extension_hook_cancellations", "Calls that ended in a cancellation."),
)


class ExtensionHookCollector(Collector):
    """Reads ``extensions.operator_view.hook_metrics`` at scrape time; one sample per (extension, hook) and counter."""

    def collect(self) -> Iterator[Metric]:
        families = {attr: CounterMetricFamily(name, doc, labels=["extension", "hook"]) for attr, name, doc in _FAMILIES}
        for stats in hook_metrics.snapshot():
            for attr, family in families.items():
                family.add_metric([stats.extension, stats.hook], float(getattr(stats, attr)))
        yield from families.values()


REGISTRY.register(ExtensionHookCollector())


def record_run(outcome: str, seconds: float | None) -> None:
    """One finished lead run (``seconds`` None: it never started)."""
    if not hook_metrics.metrics_enabled():
        return
    _RUNS.labels(outcome).inc()
    if seconds is not None:
        _RUN_SECONDS.labels(outcome).observe(seconds)


def render() -> bytes:
    """The registry in Prometheus' text exposition format."""
    return generate_latest(REGISTRY)
