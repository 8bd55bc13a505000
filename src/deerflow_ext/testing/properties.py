"""Property checks over a ``plugins:`` list, each one line for an author and one line of output
for an operator.

============================  ==================================================================
check                         holds when
============================  ==================================================================
:func:`check_same_result`     what you observe (default: what an operator sees) is the same for
                              every sampled order and next to every sampled neighbour failure
:func:`check_stack_ordering`  the composed lead and subagent stacks keep the host's ordering
                              invariants, drop nothing, and keep each entry's own middlewares in
                              the same order, for every order and neighbour middleware
:func:`check_install_rollback`  an install failing at any registration step leaves the registry
                              exactly as the list without it would
:func:`check_notification_budget`  a neighbour hanging past the lifecycle budget is cut and
                              every later contributor skipped, with the spec's lines, whatever
                              the order
============================  ==================================================================

A failure raises :class:`PropertyFailed`: hypothesis' shrunk counterexample, rendered as the
``plugins:`` list that reproduces it (generated neighbours are the real extension
``deerflow_ext.testing.neighbours:install``, so the list can be pasted into a real
``config.yaml``). Every host is a real Gateway on a temporary SQLite database and the
embedded model; the two properties that need no Gateway (ordering, rollback) run the host's
loader and composition point directly and are cheap enough for many more examples.

The host's lifecycle budget is lowered to :data:`CHECK_BUDGET` while a check runs, so a
hanging neighbour costs a quarter of a second rather than three; a lifecycle hook of yours
that legitimately takes longer needs ``notify_budget=`` raised to match.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from .composition_properties import INSTALL_ROLLBACK, STACK_ORDERING, check_install_rollback, check_stack_ordering
from .entries import Plugin, PluginLike, plugin_records, under_test
from .falsify import Hosts, PropertyFailed, falsify, new_seed, reason_of
from .harness import HostHarness
from .neighbours import NEIGHBOUR_USE
from .observation import first_difference, masked, noise, operator_view, routes_of, settled
from .strategies import neighbour_entries, plugin_lists

__all__ = [
    "CHECK_BUDGET",
    "DELEGATING_PROMPT",
    "PROPERTIES",
    "PropertyCheck",
    "PropertyFailed",
    "check_install_rollback",
    "check_notification_budget",
    "check_plugins",
    "check_same_result",
    "check_stack_ordering",
    "delegating_run",
]

CHECK_BUDGET = 0.25
"""Seconds of lifecycle notification budget while a check runs (the Gateway's is 3.0)."""

DELEGATING_PROMPT = "delegate: check the ledger"

Scenario = Callable[[HostHarness], Any]
Observe = Callable[[HostHarness], Any]


def delegating_run(host: HostHarness) -> Any:
    """The default scenario: one lead run that delegates to one subagent (two tasks)."""
    return host.run(DELEGATING_PROMPT)


# -- 1. the same result ---------------------------------------------------------------------------
SAME_RESULT = "same result whatever the order and whatever a neighbour does"


class _Result:
    """How one host is turned into the value every order must share."""

    def __init__(self, observe: Observe | None, after_close: bool) -> None:
        self.observe = observe
        self.after_close = after_close
        self.noise: frozenset[Any] = frozenset()

    def take(self, host: HostHarness, expected: Any = None) -> Any:
        if self.observe is None:
            matches = None
            if expected is not None:
                matches = lambda r: masked({"routes": r}, self.noise)["routes"] == expected["routes"]  # noqa: E731
            routes = settled(lambda: routes_of(host), matches)
            host.close()
            return masked(operator_view(host, routes), self.noise)
        observe = self.observe
        if self.after_close:
            host.close()
            return observe(host)
        if expected is None:
            return observe(host)
        return settled(lambda: observe(host), lambda value: value == expected)


def check_same_result(
    plugins: Iterable[PluginLike],
    observe: Observe | None = None,
    *,
    scenario: Scenario = delegating_run,
    observe_after_close: bool = False,
    neighbours: st.SearchStrategy[Plugin] | None = None,
    max_neighbours: int = 2,
    examples: int = 10,
    seed: int | None = None,
    app_config: Any = None,
    notify_budget: float | None = CHECK_BUDGET,
) -> None:
    """What ``observe(host)`` returns after ``scenario(host)`` is the same for every sampled
    order of *plugins* and every sampled neighbour failure.

    ``observe`` should return what your extension promises — your router's answer, your
    totals in the app store, your rows — without ids or timings; it is read on the live host
    (polled briefly until it matches, for work a service finishes in the background), or
    after shutdown with ``observe_after_close=True`` (services stopped and flushed; the
    client is closed then, read ``app_store`` or ``table_rows``). Without ``observe`` the
    check compares what an operator can see (``observation.operator_view``). The given
    order is run twice first: a custom ``observe`` that differs between those two runs is
    refused, the operator's view masks what differed. A counterexample may leave entries
    out: it is then compared with the entries it keeps, in the given order.
    """
    subject = plugin_records(plugins)
    seed = new_seed(seed)
    strategy = plugin_lists(
        subject,
        neighbours=neighbour_entries(hang_hooks=("on_task_start",)) if neighbours is None else neighbours,
        max_neighbours=max_neighbours,
    )
    result = _Result(observe, observe_after_close)
    hosts = Hosts(app_config, notify_budget)
    expected: dict[tuple[str | None, ...], Any] = {}

    def outcome(entries: Sequence[Plugin], want: Any = None) -> Any:
        with hosts.started(entries) as host:
            scenario(host)
            return result.take(host, want)

    def expected_for(entries: Sequence[Plugin]) -> Any:
        given = under_test(subject, entries)
        key = tuple(p.name for p in given)
        if key not in expected:
            expected[key] = outcome(given)
        return expected[key]

    def differs(entries: list[Plugin]) -> str | None:
        want = expected_for(entries)
        difference = first_difference(want, outcome(entries, want))
        return None if difference is None else f"the result differs from the given order's: {difference}"

    try:
        try:
            first, second = outcome(subject), outcome(subject)
        except Exception as exc:
            raise PropertyFailed(SAME_RESULT, f"the given list itself fails: {reason_of(exc)}", subject) from exc
        if observe is not None and first != second:
            raise ValueError(
                f"observe() returned different values for two runs of the same list in the same order "
                f"({first_difference(first, second)}): return only what must not depend on order"
            )
        result.noise = noise(first, second)
        expected[tuple(p.name for p in subject)] = masked(first, result.noise)
        falsify(SAME_RESULT, strategy, differs, given=subject, examples=examples, seed=seed)
    finally:
        hosts.remove()


# -- 4. the notification budget -------------------------------------------------------------------
NOTIFICATION_BUDGET = "the notification budget cuts and skips as the spec says in every order"
_BUDGET_LINE = re.compile(
    r"^Extension (?P<extension>.+): (?P<method>on_task_start|on_task_stop) (?P<verb>timed out|skipped) "
    r"for task (?P<task>\S+); the (?P<budget>[0-9.]+)s notification budget was spent$"
)


class _Lines(logging.Handler):
    """The messages a logger emitted at WARNING and above, from any thread."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            self.lines.append(record.getMessage())


@contextmanager
def _captured(name: str) -> Iterator[_Lines]:
    logger = logging.getLogger(name)
    handler = _Lines()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _hangs(entry: Plugin) -> bool:
    return entry.use == NEIGHBOUR_USE and entry.config.get("behaviour") == "hangs"


def _expected_cut(host: HostHarness, hanger: Plugin) -> list[tuple[str, str]]:
    """The hanging contributor timed out, then every contributor registered after it skipped."""
    contributions = host.extensions.task_lifecycle
    index = next(i for i, c in enumerate(contributions) if c.label == hanger.name)
    return [(contributions[index].extension, "timed out")] + [
        (c.extension, "skipped") for c in contributions[index + 1 :]
    ]


def check_notification_budget(
    plugins: Iterable[PluginLike],
    *,
    scenario: Scenario = delegating_run,
    tasks: int | None = 2,
    max_neighbours: int = 2,
    examples: int = 10,
    seed: int | None = None,
    app_config: Any = None,
    notify_budget: float = CHECK_BUDGET,
) -> None:
    """For every sampled order, with one neighbour hanging in ``on_task_start`` or
    ``on_task_stop`` and others raising or cancelling themselves, every task's notification of
    that hook logs the hanging contributor as timed out and each later one as skipped — the
    spec's two lines, nothing before it, nothing for the other hook — and the run still ends.

    ``tasks`` is how many tasks ``scenario`` runs (the default delegating run: two); ``None``
    checks only the lead runs.
    """
    subject = plugin_records(plugins)
    seed = new_seed(seed)
    hanging = neighbour_entries(kinds=("task_lifecycle",), behaviours=("hangs",))
    others = neighbour_entries(kinds=("task_lifecycle",), behaviours=("returns", "raises", "cancels"))
    strategy = plugin_lists(subject, neighbours=others, max_neighbours=max_neighbours, required=(hanging,))
    hosts = Hosts(app_config, notify_budget)

    def miscut(entries: list[Plugin]) -> str | None:
        hanger = next(e for e in entries if _hangs(e))
        method = str(hanger.config["hook"])
        with _captured("deerflow_ext.extensions") as captured, hosts.started(entries) as host:
            scenario(host)
            expected = _expected_cut(host, hanger)
            run_ids = {r.run_id for r in host.runs}
            ended = all(r.event_names and r.event_names[-1] == "end" for r in host.runs)
        if not ended:
            return "a run did not reach its stream's end event"
        found: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for line in captured.lines:
            match = _BUDGET_LINE.match(line)
            if match:
                found.setdefault((match["method"], match["task"]), []).append((match["extension"], match["verb"]))
        for (hook, task), lines in found.items():
            if hook != method:
                return f"{hook} of task {task} was cut, but only {method} hangs"
            if lines != expected:
                return f"{method} of task {task} logged {lines}, expected {expected}"
        cut = {task for _, task in found}
        if run_ids - cut or (tasks is not None and len(cut) != tasks):
            return f"{method} was cut in {len(cut)} task(s), expected {tasks or len(run_ids)}"
        return None

    try:
        falsify(NOTIFICATION_BUDGET, strategy, miscut, given=subject, examples=examples, seed=seed, keep=_hangs)
    finally:
        hosts.remove()


# -- all of them ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PropertyCheck:
    """One property as ``extensions check`` runs it: its one-line title and how to check it."""

    title: str
    check: Callable[..., None]
    runs_gateways: bool


PROPERTIES = (
    PropertyCheck(SAME_RESULT, check_same_result, True),
    PropertyCheck(STACK_ORDERING, check_stack_ordering, False),
    PropertyCheck(INSTALL_ROLLBACK, check_install_rollback, False),
    PropertyCheck(NOTIFICATION_BUDGET, check_notification_budget, True),
)


def check_plugins(
    plugins: Iterable[PluginLike],
    *,
    examples: int = 10,
    seed: int | None = None,
    app_config: Any = None,
    report: Callable[[PropertyCheck, PropertyFailed | None], None] | None = None,
) -> list[PropertyFailed]:
    """Every property over *plugins*, observing what an operator sees; returns the failures.

    ``report(property, failure_or_None)`` is called as each property finishes.
    """
    subject = plugin_records(plugins)
    failures: list[PropertyFailed] = []
    for prop in PROPERTIES:
        try:
            prop.check(subject, examples=examples, seed=seed, app_config=app_config)
        except PropertyFailed as failure:
            failures.append(failure)
            if report is not None:
                report(prop, failure)
            continue
        if report is not None:
            report(prop, None)
    return failures
