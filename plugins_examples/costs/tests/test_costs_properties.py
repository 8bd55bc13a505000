"""Property: the totals do not depend on the order of the plugins: list nor on a failing neighbour."""

from __future__ import annotations

from typing import Any

import deerflow_costs

from deerflow_ext.testing import HostHarness, Plugin, check_same_result


def totals(host: HostHarness) -> dict[str, Any]:
    response = host.client.get("/api/ext/costs/totals")
    response.raise_for_status()
    return dict(response.json())


def test_totals_are_the_same_in_any_order_next_to_any_neighbour() -> None:
    # Neighbour middlewares that raise before or after the model and tool calls they wrap must
    # not make a call count twice (the host's isolation never repeats a downstream call), and
    # a neighbour spending the start budget must not lose a task's counts.
    costs = Plugin(deerflow_costs.install, {"input_per_million": 1.0, "output_per_million": 2.0})
    check_same_result([costs], totals, max_neighbours=3)
