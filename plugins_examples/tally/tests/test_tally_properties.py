"""Property: the stats do not depend on the order of the plugins: list nor on a failing neighbour."""

from __future__ import annotations

from typing import Any

import deerflow_tally

from deerflow_ext.testing import HostHarness, check_same_result


def stats(host: HostHarness) -> dict[str, Any]:
    response = host.client.get("/api/ext/tally/stats")
    response.raise_for_status()
    counted = dict(response.json())
    # What a delegating run counts; the memory extraction it schedules runs detached, later.
    return {key: counted[key] for key in ("tasks", "tasks_by_kind", "tool_calls", "tool_calls_by_name")}


def test_the_stats_are_the_same_in_any_order_next_to_any_neighbour() -> None:
    # A neighbour middleware that raises around the tool call the tally counts must not make it
    # count twice or not at all (observe-only isolation runs the call once), and a neighbour
    # spending the start budget must not lose a task's outcome (the folder tolerates a skipped start).
    check_same_result([deerflow_tally.install], stats, max_neighbours=3)
