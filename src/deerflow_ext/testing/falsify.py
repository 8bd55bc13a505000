"""How a property check looks for a counterexample and reports it: hypothesis drives the
search (seeded, bounded, no database of examples), a failing ``plugins:`` list is reduced
to the entries it needs, and the result is raised as one :class:`PropertyFailed` an author
can paste into a ``config.yaml`` (:mod:`.properties` holds the checks themselves).
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import given as given_
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .entries import Plugin, PluginLike, plugins_yaml
from .harness import HostHarness, start_host

__all__ = ["Hosts", "PropertyFailed", "Verdict", "falsify", "new_seed", "reason_of"]


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


def reason_of(exc: BaseException) -> str:
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
        return reason_of(exc)


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


def falsify(
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


def new_seed(seed: int | None) -> int:
    # A seed is always chosen here, never left to hypothesis, so a failure can say how to replay it.
    return seed if seed is not None else random.SystemRandom().randrange(2**32)


class Hosts:
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
