"""Fewer LangChain layers per run: a composed stack's fused and carried groups, planned once.

``create_agent`` pays per middleware layer, at construction and on every model and tool call.
Composition (``stack.py``) decides where each contribution goes and checks the spec's
ordering rules; this module then makes the valid stack cheaper to run without changing what
it does. Runs of wrap-only contributions in one placement become one layer each
(``wrap_fusion.py``), and each such group runs inside the host wrap layer just before it where
there is one (``carry.py``): the same entries in the same order, every one still isolated and
attributed on its own, the same nesting.

Both decisions depend only on the stack's shape (each entry's class, and for a contribution
what :func:`layer_key` reads of it), so they are made once per shape (:func:`plan_layers`,
which ``stack.py`` keeps with the rest of its plan) and carried out on each construction's own
objects (:func:`build_layers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .carry import Carry, carry_groups, carry_plan
from .wrap_fusion import FusedRun, check_fused_groups, fuse_runs, fusible_key, fusible_runs

__all__ = ["LayerPlan", "build_layers", "layer_key", "plan_layers"]

#: What fusing reads of one contribution besides its placement: part of a stack's shape.
layer_key = fusible_key


class LayerPlan(NamedTuple):
    """How one shape of stack is handed to LangChain in fewer layers."""

    runs: tuple[FusedRun, ...]  # fusion.fusible_runs of the composed stack
    carries: tuple[Carry, ...]  # carry.carry_plan of the fused stack


def plan_layers(stack: Sequence[Any]) -> LayerPlan:
    """Decide how a composed, valid ``stack`` is fused and carried (nothing is changed)."""
    runs = fusible_runs(stack)
    fused = fuse_runs(stack, runs)
    check_fused_groups(fused)  # fusion's own work, checked as composition checks placements
    return LayerPlan(runs, carry_plan(fused))


def build_layers(stack: Sequence[Any], plan: LayerPlan) -> list[Any]:
    """``stack`` fused and carried as ``plan`` (:func:`plan_layers` of a stack of this shape)
    says. Its contributed wrappers must be this construction's own, shown to no one yet: they
    are fused where they stand."""
    return carry_groups(fuse_runs(stack, plan.runs, in_place=True), plan.carries)
