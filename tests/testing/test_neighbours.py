"""Generated neighbours: every one the strategies draw is a real, loadable plugins: entry."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from deerflow_ext.testing import HostHarness, Plugin, load_plugins
from deerflow_ext.testing.neighbours import BEHAVIOURS, NEIGHBOUR_USE
from deerflow_ext.testing.strategies import REGISTRATION_KINDS, install_failures, neighbour_entries, orders
from testing import order_extensions

FIELDS = {
    "middlewares": "middlewares",
    "task_lifecycle": "task_lifecycle",
    "system_model_observer": "system_model_observers",
    "agent_assembly_observer": "assembly_observers",
    "context_compaction_observer": "compaction_observers",
    "service": "services",
    "routers": "routers",
}


def registered(plugin: Plugin) -> dict[str, int]:
    loaded = load_plugins([plugin.resolved("neighbour-1")])
    assert not loaded.diagnostics.snapshot(), loaded.diagnostics.snapshot()
    return {kind: len(getattr(loaded.extensions, field)) for kind, field in FIELDS.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbour_entries(kinds=REGISTRATION_KINDS, behaviours=BEHAVIOURS))
def test_every_drawn_neighbour_loads_and_registers_what_its_config_says(neighbour: Plugin) -> None:
    assert neighbour.use == NEIGHBOUR_USE
    counts = registered(neighbour)
    assert counts == {kind: int(kind == neighbour.config["contributes"]) for kind in FIELDS}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(install_failures())
def test_a_failing_install_is_one_attributed_load_failure_and_leaves_nothing(neighbour: Plugin) -> None:
    loaded = load_plugins([order_extensions.tally, neighbour.resolved("neighbour-1")])
    (diagnostic,) = loaded.diagnostics.snapshot()
    assert diagnostic.extension == NEIGHBOUR_USE and diagnostic.phase == "load"
    step = neighbour.config["fails_after"]
    assert diagnostic.message == f"install() failed: RuntimeError: neighbour install fails after {step} registration(s)"
    assert [c.label for c in loaded.extensions.task_lifecycle] == ["tally"]


@settings(max_examples=20, deadline=None)
@given(orders(["a:install", "b:install", "c:install"]))
def test_orders_keep_each_entrys_name(order: list[Plugin]) -> None:
    assert sorted((p.name, p.use) for p in order) == [("a", "a:install"), ("b", "b:install"), ("c", "c:install")]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"contributes": "middlewares", "behaviour": "hangs"}, "a middlewares neighbour may be"),
        ({"contributes": "nothing"}, "contributes must be one or a list of"),
        ({"contributes": "middlewares", "placement": "INSIDE"}, "placement must be one of"),
        ({"contributes": "task_lifecycle", "hook": "wrap_model_call"}, "hook must be one of"),
        ({"contributes": "service", "enable": True}, "unknown neighbour config key(s) ['enable']"),
        ({"contributes": ["service"], "fails_after": 2}, "fails_after must be a whole number from 0 to 1"),
    ],
)
def test_a_bad_neighbour_config_is_one_clear_install_failure(config: dict[str, Any], message: str) -> None:
    loaded = load_plugins([Plugin(NEIGHBOUR_USE, config, name="neighbour-1")])
    (diagnostic,) = loaded.diagnostics.snapshot()
    assert diagnostic.message.startswith("install() failed: ValueError: ")
    assert message in diagnostic.message and "\n" not in diagnostic.message


def test_failing_neighbours_in_a_real_gateway_are_contained_and_attributed(deerflow_host: Any) -> None:
    raising = {"contributes": "middlewares", "behaviour": "raises", "hook": "wrap_model_call"}
    host: HostHarness = deerflow_host(
        [
            Plugin(NEIGHBOUR_USE, raising, name="neighbour-1"),
            order_extensions.sturdy,
            Plugin(NEIGHBOUR_USE, {"contributes": "task_lifecycle", "behaviour": "cancels"}, name="neighbour-2"),
        ]
    )
    outcome = host.run("delegate: check the ledger")
    assert outcome.outcome == "completed"
    assert host.app_store.get(order_extensions.Timed).count == 2  # both tasks, the neighbours notwithstanding
    assert {d.extension for d in host.diagnostics.snapshot()} == {NEIGHBOUR_USE}
    assert any("neighbour raises in wrap_model_call" in d.message for d in host.diagnostics.snapshot())
