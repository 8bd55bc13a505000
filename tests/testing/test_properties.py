"""The kit's property checks fail on extensions that deserve it, with the shrunk counterexample
as pasteable ``plugins:`` YAML, and pass on ones that do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow_ext.config.loading import app_config_from_text
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.testing import (
    HostHarness,
    Plugin,
    PropertyFailed,
    check_install_rollback,
    check_notification_budget,
    check_same_result,
    check_stack_ordering,
    start_host,
)
from deerflow_ext.testing.check import plugins_of
from deerflow_ext.testing.neighbours import NEIGHBOUR_USE
from deerflow_ext.testing.properties import delegating_run
from testing import order_extensions as ox

SEED = 0


def seen(host: HostHarness) -> int | None:
    value = host.app_store.get(ox.Seen)
    return value.count if value is not None else None


def timed(host: HostHarness) -> int | None:
    value = host.app_store.get(ox.Timed)
    return value.count if value is not None else None


def test_an_order_dependent_extension_fails_with_the_order_that_shows_it() -> None:
    with pytest.raises(PropertyFailed) as failed:
        check_same_result([ox.tally, ox.echo], seen, seed=SEED)
    assert failed.value.reason == "the result differs from the given order's: <the whole result>: 2 != 1"
    assert failed.value.yaml.split("\n", 2)[2] == (
        "plugins:\n"
        "  - name: echo\n"
        "    use: testing.order_extensions:echo\n"
        "  - name: tally\n"
        "    use: testing.order_extensions:tally\n"
    )


def test_an_extension_that_assumes_start_implies_stop_fails_next_to_a_hanging_neighbour(tmp_path: Path) -> None:
    with pytest.raises(PropertyFailed) as failed:
        check_same_result([ox.fragile], timed, seed=SEED)
    assert failed.value.yaml.split("\n", 2)[2] == (
        "plugins:\n"
        "  - name: neighbour-1\n"
        "    use: deerflow_ext.testing.neighbours:install\n"
        "    config:\n"
        "      contributes: task_lifecycle\n"
        "      behaviour: hangs\n"
        "      hook: on_task_start\n"
        "  - name: fragile\n"
        "    use: testing.order_extensions:fragile\n"
    )
    # Pasted into a config.yaml, the counterexample fails the same way in a real Gateway.
    config = app_config_from_text(failed.value.yaml)
    with start_host(plugins_of(config), tmp_path / "pasted", notify_budget=0.25) as host:
        delegating_run(host)
        assert timed(host) is None  # both tasks' on_task_start were cut, so both stops raised
    with start_host([ox.fragile], tmp_path / "alone", notify_budget=0.25) as host:
        delegating_run(host)
        assert timed(host) == 2


def test_an_extension_that_tolerates_a_skipped_start_passes() -> None:
    check_same_result([ox.sturdy, ox.tally], timed, seed=SEED)


def test_the_operators_view_is_used_when_nothing_is_observed() -> None:
    # tally's count is not served by a router, so only the run's end and the loads are seen.
    check_same_result([ox.tally, ox.sturdy], seed=SEED, examples=4)


def test_an_observation_that_changes_between_two_identical_runs_is_refused() -> None:
    runs = iter(range(100))
    with pytest.raises(ValueError, match="different values for two runs of the same list"):
        check_same_result([ox.tally], lambda host: next(runs), examples=2)


def test_a_middleware_set_that_depends_on_order_fails_the_stack_property() -> None:
    with pytest.raises(PropertyFailed) as failed:
        check_stack_ordering([ox.marker, ox.follower], seed=SEED)
    assert "an entry's own middlewares moved" in failed.value.reason
    assert [p.name for p in failed.value.plugins] == ["follower", "marker"]


def test_independent_middlewares_keep_every_ordering_invariant() -> None:
    check_stack_ordering([ox.marker, Plugin(ox.marker, name="marker-again")], seed=SEED)


def test_rollback_holds_and_a_registry_that_does_not_roll_back_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    check_install_rollback([ox.tally, ox.marker], seed=SEED)
    monkeypatch.setattr(HostRegistry, "rollback", lambda self, mark: None)
    with pytest.raises(PropertyFailed) as failed:
        check_install_rollback([ox.tally, ox.marker], seed=SEED)
    # Only the failing install is needed: it registered a lifecycle contributor, then raised.
    assert [p.record() for p in failed.value.plugins] == [
        {"name": "neighbour-1", "use": NEIGHBOUR_USE, "config": {"contributes": "task_lifecycle", "fails_after": 1}}
    ]


def test_the_budget_cuts_a_hanging_neighbour_and_skips_the_rest_in_every_order() -> None:
    check_notification_budget([ox.sturdy, ox.tally], seed=SEED, examples=6)


def test_a_contributor_slower_than_the_budget_is_reported_with_the_list_that_shows_it() -> None:
    with pytest.raises(PropertyFailed) as failed:
        check_notification_budget([Plugin(ox.slow, {"seconds": 0.6})], seed=SEED, examples=6)
    # The neighbour hangs in on_task_start only, yet slow's own on_task_stop is cut too.
    assert failed.value.reason.startswith("on_task_stop of task ")
    assert failed.value.reason.endswith(" was cut, but only on_task_start hangs")
    assert [p.name for p in failed.value.plugins] == ["neighbour-1", "slow"]


def test_check_plugins_runs_every_property_and_reports_each() -> None:
    from deerflow_ext.testing import check_plugins
    from deerflow_ext.testing.properties import PROPERTIES

    reported: list[tuple[str, object]] = []
    failures = check_plugins(
        [ox.tally, ox.sturdy], examples=2, seed=SEED, report=lambda p, f: reported.append((p.title, f))
    )
    assert failures == []
    assert reported == [(p.title, None) for p in PROPERTIES]


def test_a_neighbour_raising_system_exit_anywhere_else_changes_nothing_and_is_drawn_by_default() -> None:
    # Each drawn neighbour raises SystemExit from on_task_start, a middleware hook (before or
    # after its handler) or an observer; the Gateway contains each as that neighbour's
    # failure, so sturdy's count is what it is alone.
    from deerflow_ext.testing.strategies import CONTAINED_BEHAVIOURS, neighbour_entries

    assert "exits" in CONTAINED_BEHAVIOURS
    exiting = neighbour_entries(behaviours=("exits",), hang_hooks=("on_task_start",))
    check_same_result([ox.sturdy], timed, neighbours=exiting, max_neighbours=1, examples=8, seed=SEED)


def test_a_neighbour_exiting_in_on_task_stop_ahead_of_yours_is_shown_to_skip_your_stop() -> None:
    # SystemExit propagates out of the notification (the spec), so sturdy's on_task_stop after
    # it never runs: allowed, and the reason check_same_result draws exits in on_task_start only.
    from deerflow_ext.testing.strategies import neighbour_entries

    exiting = neighbour_entries(kinds=("task_lifecycle",), behaviours=("exits",), hang_hooks=("on_task_stop",))
    with pytest.raises(PropertyFailed) as failed:
        check_same_result([ox.sturdy], timed, neighbours=exiting, max_neighbours=1, examples=8, seed=SEED)
    assert failed.value.reason == "the result differs from the given order's: <the whole result>: 2 != null"
    assert failed.value.yaml.split("\n", 2)[2] == (
        "plugins:\n"
        "  - name: neighbour-1\n"
        "    use: deerflow_ext.testing.neighbours:install\n"
        "    config:\n"
        "      contributes: task_lifecycle\n"
        "      behaviour: exits\n"
        "      hook: on_task_stop\n"
        "  - name: sturdy\n"
        "    use: testing.order_extensions:sturdy\n"
    )
