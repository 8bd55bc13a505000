"""Hypothesis strategies over ``plugins:`` lists: orders, generated neighbours, failing installs.

Every strategy draws :class:`~deerflow_ext.testing.Plugin` entries, never bare objects, so
whatever a property check finds can be printed as the ``plugins:`` list that reproduces it.
Choices are listed simplest first (``returns`` before ``raises`` before ``hangs``; the
given order before any other), because hypothesis shrinks towards the first choice: a
shrunk counterexample is then the least surprising list that still fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import strategies as st

from deerflow_extension_api import Placement

from .entries import Plugin, PluginLike, plugin_records
from .neighbours import (
    LIFECYCLE_HOOKS,
    MIDDLEWARE_HOOKS,
    NEIGHBOUR_USE,
    allowed_behaviours,
)

__all__ = [
    "CONTAINED_BEHAVIOURS",
    "NEIGHBOUR_KINDS",
    "REGISTRATION_KINDS",
    "install_failures",
    "neighbour_entries",
    "orders",
    "plugin_lists",
]

NEIGHBOUR_KINDS = (
    "task_lifecycle",
    "middlewares",
    "system_model_observer",
    "agent_assembly_observer",
    "context_compaction_observer",
)
"""What a generated neighbour contributes, by default: every kind the host calls during a run."""

REGISTRATION_KINDS = (*NEIGHBOUR_KINDS, "service", "routers")
"""What a failing install may register before it fails: every registry method."""

CONTAINED_BEHAVIOURS = ("returns", "raises", "cancels", "hangs", "exits")
"""The behaviours drawn by default: every one the host contains at the contributor.

``exits`` (``SystemExit``) is among them: the spec lets it propagate out of a
notification or a middleware, and the Gateway treats what reaches its task boundary as
that extension's failure (attributed, contained; the process keeps serving), so a
neighbour raising it must change your result no more than one raising an ``Exception``.
"""

_STOPS_NOTIFICATION = ("hangs", "exits")
_SCOPES = ("BOTH", "LEAD", "SUBAGENT")
_PLACEMENTS = tuple(p.name for p in (Placement.STANDARD, *(p for p in Placement if p is not Placement.STANDARD)))


def orders(entries: Iterable[PluginLike]) -> st.SearchStrategy[list[Plugin]]:
    """Every order of *entries*; names are fixed first, so an entry keeps its name in any order."""
    return st.permutations(plugin_records(entries))


def _config(**values: Any) -> dict[str, Any]:
    # Defaults are left out, so a counterexample's config says only what matters.
    defaults = {"behaviour": "returns", "placement": "STANDARD", "scope": "BOTH", "order": 0, "after_handler": False}
    return {k: v for k, v in values.items() if v is not None and defaults.get(k, object()) != v}


@st.composite
def _neighbour(
    draw: st.DrawFn,
    kinds: Sequence[str],
    behaviours: Sequence[str],
    hang_hooks: Sequence[str],
) -> Plugin:
    # The behaviour is drawn first and the kind among those that can show it: drawn the other
    # way round, the one behaviour only lifecycle hooks have (hangs) would be rare.
    def shows(kind: str, behaviour: str) -> bool:
        # Hanging or exiting in a lifecycle hook stops that notification (the budget cuts it,
        # SystemExit propagates): drawn only in ``hang_hooks``, so not at all without them.
        stops = kind == "task_lifecycle" and behaviour in _STOPS_NOTIFICATION
        return behaviour in allowed_behaviours(kind) and (bool(hang_hooks) or not stops)

    behaviour = draw(st.sampled_from([b for b in behaviours if any(shows(k, b) for k in kinds)]))
    kind = draw(st.sampled_from([k for k in kinds if shows(k, behaviour)]))
    if kind == "middlewares":
        wraps = draw(st.sampled_from(MIDDLEWARE_HOOKS))
        config = _config(
            contributes=kind,
            behaviour=behaviour,
            hook=wraps,
            placement=draw(st.sampled_from(_PLACEMENTS)),
            scope=draw(st.sampled_from(_SCOPES)),
            order=draw(st.integers(-2, 2)),
            after_handler=draw(st.booleans()) if wraps.startswith("wrap_") and behaviour != "returns" else None,
        )
    elif kind == "task_lifecycle":
        hooks = hang_hooks if behaviour in _STOPS_NOTIFICATION else LIFECYCLE_HOOKS
        config = _config(contributes=kind, behaviour=behaviour, hook=draw(st.sampled_from(hooks)))
    else:
        config = _config(contributes=kind, behaviour=behaviour)
    return Plugin(NEIGHBOUR_USE, config)


def neighbour_entries(
    *,
    kinds: Sequence[str] = NEIGHBOUR_KINDS,
    behaviours: Sequence[str] = CONTAINED_BEHAVIOURS,
    hang_hooks: Sequence[str] = LIFECYCLE_HOOKS,
) -> st.SearchStrategy[Plugin]:
    """One neighbour extension generated from the contract (see :mod:`.neighbours`).

    Middlewares come at every ``Placement`` and scope, on every hook, with an ``order``;
    lifecycle contributors misbehave in one hook; observers of system model calls, agent
    assembly and compaction misbehave when called. ``hangs`` is drawn only for lifecycle
    hooks, and a lifecycle contributor hangs or exits only in ``hang_hooks``: either stops
    that notification (the budget cuts a hang; ``SystemExit`` propagates out of it), so a
    contributor ahead of yours that does it in ``on_task_stop`` skips your ``on_task_stop``,
    which the spec allows; a check that your result never changes draws them in
    ``on_task_start`` only.
    """
    return _neighbour(tuple(kinds), tuple(behaviours), tuple(hang_hooks))


@st.composite
def _failing_install(draw: st.DrawFn, kinds: Sequence[str]) -> Plugin:
    registered = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3))
    step = draw(st.integers(0, len(registered)))
    contributes: str | list[str] = registered[0] if len(registered) == 1 else registered
    return Plugin(NEIGHBOUR_USE, {"contributes": contributes, "fails_after": step})


def install_failures(*, kinds: Sequence[str] = REGISTRATION_KINDS) -> st.SearchStrategy[Plugin]:
    """A neighbour whose install registers one to three contributions, then raises at a drawn step
    (before the first registration, between two, or after the last)."""
    return _failing_install(tuple(kinds))


def _named(entries: Sequence[Plugin], taken: set[str]) -> list[Plugin]:
    """Give each unnamed neighbour the next free ``neighbour-N`` name, in list order."""
    named: list[Plugin] = []
    number = 0
    for entry in entries:
        if entry.name is None:
            while True:
                number += 1
                name = f"neighbour-{number}"
                if name not in taken:
                    break
            entry = entry.resolved(name)
        named.append(entry)
    return named


@st.composite
def _lists(
    draw: st.DrawFn,
    subject: Sequence[Plugin],
    neighbours: st.SearchStrategy[Plugin],
    max_neighbours: int,
    required: Sequence[st.SearchStrategy[Plugin]],
) -> list[Plugin]:
    entries: list[Plugin] = list(draw(st.permutations(subject)))
    added = [draw(strategy) for strategy in required]
    added += draw(st.lists(neighbours, max_size=max_neighbours))
    for neighbour in added:
        entries.insert(draw(st.integers(0, len(entries))), neighbour)
    return _named(entries, {p.name for p in subject if p.name})


def plugin_lists(
    entries: Iterable[PluginLike],
    *,
    neighbours: st.SearchStrategy[Plugin] | None = None,
    max_neighbours: int = 2,
    required: Sequence[st.SearchStrategy[Plugin]] = (),
) -> st.SearchStrategy[list[Plugin]]:
    """*entries* in every order, with up to ``max_neighbours`` neighbours inserted anywhere.

    ``required`` strategies each add exactly one more neighbour (a hanging one, a failing
    install) before the optional ones. Shrinking removes neighbours, moves them to the
    front and brings the order back towards the given one.
    """
    subject = plugin_records(entries)
    return _lists(subject, neighbour_entries() if neighbours is None else neighbours, max_neighbours, tuple(required))
