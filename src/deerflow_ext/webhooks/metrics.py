"""Webhook counters for ``GET /metrics``: plain integers the worker bumps, read by a
prometheus-client custom collector at scrape time (the Gateway registers it on its registry,
``gateway.routes.operator``), so this package needs nothing from the runtime's metrics.

- ``deerflow_webhook_attempts_total{result="ok"|"error"}``: every attempt;
- ``deerflow_webhook_deliveries_total{result="delivered"|"failed"}``: deliveries settled
  (``failed``: its last allowed attempt failed, or the policy refused its URL at delivery).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["COUNTS", "WebhookCollector", "count"]

COUNTS: Counter[tuple[str, str]] = Counter()


def count(family: str, result: str) -> None:
    COUNTS[(family, result)] += 1


class WebhookCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        attempts = CounterMetricFamily("deerflow_webhook_attempts", "Webhook delivery attempts.", labels=["result"])
        settled = CounterMetricFamily(
            "deerflow_webhook_deliveries", "Webhook deliveries settled, delivered or failed.", labels=["result"]
        )
        for result in ("ok", "error"):
            attempts.add_metric([result], float(COUNTS[("attempts", result)]))
        for result in ("delivered", "failed"):
            settled.add_metric([result], float(COUNTS[("deliveries", result)]))
        yield attempts
        yield settled
