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
import random
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import given as given_
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from deerflow_ext.extensions.contract.snapshot import CONTRIBUTION_KINDS
from deerflow_extension_api import AgentBuildContext, AgentScope

from .entries import Plugin, PluginLike, plugin_records, plugins_yaml
from .harness import HostHarness, LoadResult, load_plugins, start_host
from .neighbours import NEIGHBOUR_USE
from .observation import first_difference, masked, noise, operator_view, routes_of, settled
from .strategies import install_failures, neighbour_entries, plugin_lists

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


class PropertyFailed(AssertionError):
    """A property does not hold; ``plugins`` is the shrunk counterexample, ``yaml`` its ``plugins:`` block."""

    def __init__(self, title: str, reason: str, plugins: Sequence[Plugin], *, seed: int | None = None) -> None:
        self.title = title
        self.reason = reason
        self.plugins = tuple(plugins)
        self.seed = seed
        how = f"found with seed {seed}; " if seed is not None else ""
        self.yaml = plugins_yaml(
            self.plugins,
            comment=f"counterexample to: {title}\n{how}paste under config.yaml to reproduce in a real Gateway",
        )
        super().__init__(f"{title}: {reason}\n\nshrunk counterexample:\n{self.yaml}")


class _Counterexample(AssertionError):
    """One failing example, raised from one place so hypothesis sees one bug to shrink."""


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if not isinstance(exc, AssertionError) else first or "assertion failed"


Verdict = Callable[[list[Plugin]], "str | None"]


def _verdict(fails: Verdict, entries: list[Plugin]) -> str | None:
    """Why *entries* break the property, or ``None``; anything raised is a reason too."""
    try:
        return fails(entries)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a neighbour's SystemExit is a counterexample too
        return _reason(exc)


def _reduced(
    entries: list[Plugin], reason: str, fails: Verdict, keep: Callable[[Plugin], bool], given: Sequence[str]
) -> tuple[list[Plugin], str]:
    """Hypothesis' counterexample made smaller still: drop every entry the failure does not need
    (entries under test included, which hypothesis cannot drop), then put the rest back in the
    given order wherever that keeps it failing. Runs only once a property has failed."""
    changed = True
    while changed:
        changed = False
        for entry in list(entries):
            if keep(entry) or len(entries) == 1:
                continue
            candidate = [e for e in entries if e is not entry]
            why = _verdict(fails, candidate)
            if why is not None:
                entries, reason, changed = candidate, why, True
    rank = {name: i for i, name in enumerate(given)}
    for _ in range(len(entries)):
        swapped = False
        for i in range(len(entries) - 1):
            a, b = entries[i], entries[i + 1]
            if a.name in rank and b.name in rank and rank[str(a.name)] > rank[str(b.name)]:
                candidate = [*entries[:i], b, a, *entries[i + 2 :]]
                why = _verdict(fails, candidate)
                if why is not None:
                    entries, reason, swapped = candidate, why, True
        if not swapped:
            break
    return entries, reason


def _falsify(
    title: str,
    strategy: st.SearchStrategy[list[Plugin]],
    fails: Verdict,
    *,
    given: Sequence[Plugin],
    examples: int,
    seed: int | None,
    keep: Callable[[Plugin], bool] = lambda entry: False,
) -> None:
    """Search *strategy* for a list that *fails*; raise :class:`PropertyFailed` with the smallest."""
    failing: list[tuple[list[Plugin], str]] = []

    def example(entries: list[Plugin]) -> None:
        reason = _verdict(fails, entries)
        if reason is not None:
            failing[:] = [(entries, reason)]
            raise _Counterexample(reason)

    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
    )(given_(strategy)(example))
    if seed is not None:
        run = hypothesis_seed(seed)(run)
    try:
        run()
    except _Counterexample:
        [(found, why)] = failing
        entries, reason = _reduced(found, why, fails, keep, [str(p.name) for p in given])
        raise PropertyFailed(title, reason, entries, seed=seed) from None


def _seed(seed: int | None) -> int:
    # A seed is always chosen here, never left to hypothesis, so a failure can say how to replay it.
    return seed if seed is not None else random.SystemRandom().randrange(2**32)


class _Hosts:
    """Gateways for one check, each in its own folder under one temporary directory."""

    def __init__(self, app_config: Any, notify_budget: float | None) -> None:
        self.app_config = app_config
        self.notify_budget = notify_budget
        self.root = Path(tempfile.mkdtemp(prefix="deerflow-check-"))
        self.count = 0

    @contextmanager
    def started(self, entries: Iterable[PluginLike]) -> Iterator[HostHarness]:
        self.count += 1
        directory = self.root / f"host-{self.count}"
        host = start_host(entries, directory, app_config=self.app_config, notify_budget=self.notify_budget)
        try:
            yield host
        finally:
            host.close()
            shutil.rmtree(directory, ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# -- 1. the same result ---------------------------------------------------------------------------
SAME_RESULT = "same result whatever the order and whatever a neighbour does"


def _under_test(subject: Sequence[Plugin], entries: Sequence[Plugin]) -> list[Plugin]:
    """The entries under test present in *entries*, in the given order: what a list is compared with."""
    present = {e.name for e in entries}
    return [p for p in subject if p.name in present]


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
    seed = _seed(seed)
    strategy = plugin_lists(
        subject,
        neighbours=neighbour_entries(hang_hooks=("on_task_start",)) if neighbours is None else neighbours,
        max_neighbours=max_neighbours,
    )
    result = _Result(observe, observe_after_close)
    hosts = _Hosts(app_config, notify_budget)
    expected: dict[tuple[str | None, ...], Any] = {}

    def outcome(entries: Sequence[Plugin], want: Any = None) -> Any:
        with hosts.started(entries) as host:
            scenario(host)
            return result.take(host, want)

    def expected_for(entries: Sequence[Plugin]) -> Any:
        given = _under_test(subject, entries)
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
            raise PropertyFailed(SAME_RESULT, f"the given list itself fails: {_reason(exc)}", subject) from exc
        if observe is not None and first != second:
            raise ValueError(
                f"observe() returned different values for two runs of the same list in the same order "
                f"({first_difference(first, second)}): return only what must not depend on order"
            )
        result.noise = noise(first, second)
        expected[tuple(p.name for p in subject)] = masked(first, result.noise)
        _falsify(SAME_RESULT, strategy, differs, given=subject, examples=examples, seed=seed)
    finally:
        hosts.remove()


# -- 2. stack ordering ----------------------------------------------------------------------------
STACK_ORDERING = "lead and subagent stacks keep the host's ordering invariants in every order"
_SCOPES = ((AgentScope.LEAD, "lead"), (AgentScope.SUBAGENT, "general-purpose"))


def _composed(loaded: LoadResult, app_config: Any) -> dict[str, list[Any]]:
    """The final middleware stack of a lead agent and of a subagent, as the builder composes them."""
    from deerflow_ext.agents.lead import build_host_stack
    from deerflow_ext.agents.models import create_chat_model, effective_model_name
    from deerflow_ext.agents.policy import project_policy
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.composition.stack import compose_middleware_stack

    config = AppConfig.model_validate({**dict(app_config or {}), "models": []})
    model = create_chat_model(config)
    stacks: dict[str, list[Any]] = {}
    for scope, agent_name in _SCOPES:
        policy = project_policy(config, scope, agent_name)
        host = build_host_stack(config, scope=scope, model=model, policy=policy)
        ctx = AgentBuildContext(
            scope=scope, agent_name=agent_name, model_name=effective_model_name(model), policy=policy
        )
        stacks[agent_name] = compose_middleware_stack(
            host, extensions=loaded.extensions, ctx=ctx, diagnostics=loaded.diagnostics
        )
    return stacks


def _own_middlewares(stack: Sequence[Any]) -> dict[str, list[str]]:
    from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware

    own: dict[str, list[str]] = {}
    for mw in stack:
        if isinstance(mw, IsolatedMiddleware) and mw.extension != NEIGHBOUR_USE:
            own.setdefault(mw.extension, []).append(type(mw.inner).__qualname__)
    return own


def check_stack_ordering(
    plugins: Iterable[PluginLike],
    *,
    max_neighbours: int = 4,
    examples: int = 50,
    seed: int | None = None,
    app_config: Any = None,
) -> None:
    """For every sampled order, with neighbour middlewares at every placement and scope, the lead
    and subagent stacks pass the host's ``assert_ordering``, nothing is dropped for breaking a
    placement promise, and each entry's own middlewares keep the order they have in the given
    list (their placement and ``order`` decide it, never their neighbours)."""
    from deerflow_ext.extensions.composition.ordering import assert_ordering
    from deerflow_ext.extensions.composition.wrap_fusion import check_fused_groups

    subject = plugin_records(plugins)
    seed = _seed(seed)
    strategy = plugin_lists(
        subject, neighbours=neighbour_entries(kinds=("middlewares",)), max_neighbours=max_neighbours
    )

    def own(entries: Sequence[Plugin]) -> dict[str, dict[str, list[str]]]:
        stacks = _composed(load_plugins(entries, app_config=app_config), app_config)
        return {agent: _own_middlewares(stack) for agent, stack in stacks.items()}

    def disordered(entries: list[Plugin]) -> str | None:
        loaded = load_plugins(entries, app_config=app_config)
        want = own(_under_test(subject, entries))
        for agent, stack in _composed(loaded, app_config).items():
            assert_ordering(stack)
            check_fused_groups(stack)
            dropped = [d for d in loaded.diagnostics.snapshot() if "dropped" in d.message]
            if dropped:
                return f"{agent}: {dropped[0]}"
            difference = first_difference(want[agent], _own_middlewares(stack))
            if difference is not None:
                return f"{agent}: an entry's own middlewares moved: {difference}"
        return None

    _falsify(STACK_ORDERING, strategy, disordered, given=subject, examples=examples, seed=seed)


# -- 3. install rollback --------------------------------------------------------------------------
INSTALL_ROLLBACK = "a failing install leaves the registry exactly as before it"
_FIELDS = CONTRIBUTION_KINDS


def _registry(entries: Sequence[Plugin], app_config: Any) -> Any:
    """What a load registered, per kind and in order, by entry name; or the error that stopped it."""
    try:
        loaded = load_plugins(entries, app_config=app_config)
    except Exception as exc:
        return {"stopped": _reason(exc)}
    ext = loaded.extensions
    registry: dict[str, Any] = {
        kind: [[c.label, c.extension, type(c.contributor).__qualname__] for c in getattr(ext, kind)] for kind in _FIELDS
    }
    registry["loaded"] = list(ext.loaded)
    registry["diagnostics"] = sorted([d.extension, d.phase, d.message] for d in loaded.diagnostics.snapshot())
    return registry


def _fails_to_install(entry: Plugin) -> bool:
    return entry.use == NEIGHBOUR_USE and "fails_after" in entry.config


def check_install_rollback(
    plugins: Iterable[PluginLike],
    *,
    max_neighbours: int = 2,
    examples: int = 50,
    seed: int | None = None,
    app_config: Any = None,
) -> None:
    """For every sampled order, with well-behaved neighbours around, a neighbour whose install
    registers up to three contributions and raises at any step leaves the registry — every
    contribution, in order, the loaded list and every other diagnostic — exactly as the same
    list without that neighbour."""
    subject = plugin_records(plugins)
    seed = _seed(seed)
    strategy = plugin_lists(
        subject,
        neighbours=neighbour_entries(behaviours=("returns",)),
        max_neighbours=max_neighbours,
        required=(install_failures(),),
    )

    def left_behind(entries: list[Plugin]) -> str | None:
        failing = next(e for e in entries if _fails_to_install(e))
        got = _registry(entries, app_config)
        want = _registry([e for e in entries if e is not failing], app_config)
        if "stopped" not in got:
            mine = [d for d in got["diagnostics"] if d[2].startswith("install() failed: RuntimeError: neighbour")]
            if len(mine) != 1:
                return f"{failing.name} failing left {len(mine)} load diagnostics, not 1"
            got["diagnostics"] = [d for d in got["diagnostics"] if d not in mine]
        difference = first_difference(want, got)
        return None if difference is None else f"{failing.name} failing left the registry different: {difference}"

    _falsify(
        INSTALL_ROLLBACK, strategy, left_behind, given=subject, examples=examples, seed=seed, keep=_fails_to_install
    )


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
    seed = _seed(seed)
    hanging = neighbour_entries(kinds=("task_lifecycle",), behaviours=("hangs",))
    others = neighbour_entries(kinds=("task_lifecycle",), behaviours=("returns", "raises", "cancels"))
    strategy = plugin_lists(subject, neighbours=others, max_neighbours=max_neighbours, required=(hanging,))
    hosts = _Hosts(app_config, notify_budget)

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
        _falsify(NOTIFICATION_BUDGET, strategy, miscut, given=subject, examples=examples, seed=seed, keep=_hangs)
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
