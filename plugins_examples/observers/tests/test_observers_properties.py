"""Property: the outcome tally is the same whatever the order and whatever a neighbour does."""

from __future__ import annotations

import deerflow_observers
from deerflow_observers import OutcomeTally

from deerflow_ext.testing import HostHarness, check_same_result


def tally(host: HostHarness) -> dict[str, int]:
    value = host.app_store.get(OutcomeTally)
    return value.snapshot() if value is not None else {}


def test_the_tally_counts_every_task_in_any_order_next_to_any_neighbour() -> None:
    # TaskTimer tolerates a skipped on_task_start (no clock: the duration is unknown, the task
    # still counts), which is exactly what a neighbour spending the start budget causes.
    check_same_result([deerflow_observers.install], tally)
