"""Property: one task span per task, with its outcome, whatever the order and whatever a neighbour does."""

from __future__ import annotations

from typing import Any

import deerflow_otel
from deerflow_otel import finished_spans

from deerflow_ext.testing import HostHarness, Plugin, check_same_result


def task_spans(host: HostHarness) -> list[tuple[Any, ...]]:
    """The invoke_agent spans of this host's runs (the in-memory exporter is shared by the process)."""
    runs = {run.run_id for run in host.runs}
    return sorted(
        (span.name, span.attributes.get("deerflow.task.kind"), span.attributes.get("deerflow.task.outcome"))
        for span in finished_spans()
        if span.name.startswith("invoke_agent") and span.attributes.get("deerflow.run.id") in runs
    )


def test_every_task_has_one_span_in_any_order_next_to_any_neighbour() -> None:
    # A neighbour that spends the start budget skips TaskSpans.on_task_start; the span is then
    # opened at stop (deerflow.task.start_observed = false), so it is still one span per task.
    otel = Plugin(deerflow_otel.install, {"exporter": "memory"})
    check_same_result([otel], task_spans, observe_after_close=True)
