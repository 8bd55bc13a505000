"""pluggy hookspecs: one per contribution kind.

The specs exist for registration, not for calling: pluggy validates each contributor's method
signature against them when it is registered (a mismatch is an install failure, so it rolls
back). The host never calls ``pm.hook.X()`` — pluggy stops at the first exception, has no
async and no timeouts, and orders LIFO — it reads ``get_hookimpls()`` and calls in
registration order under its own isolation, budget and origin rules.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pluggy

__all__ = [
    "KINDS",
    "PROJECT_NAME",
    "SPEC_ARGNAMES",
    "ContributionKind",
    "ContributionSpecs",
    "hookimpl",
    "hookspec",
]

PROJECT_NAME = "deerflow"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class ContributionSpecs:
    """Every hook a contribution may implement; argument names are the contract's."""

    @hookspec
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        """Middleware contributor: return a sequence of ``MiddlewarePlacement``."""

    @hookspec
    def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> Any:
        """Task lifecycle: awaited before the task's agent is built."""

    @hookspec
    def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> Any:
        """Task lifecycle: awaited after persistence, before the barrier is released."""

    @hookspec
    def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> Any:
        """System-model-call observer."""

    @hookspec
    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> Any:
        """Agent-assembly observer (the one synchronous contribution)."""

    @hookspec
    def on_context_compacted(self, app_store: Any, task_store: Any, event: Any) -> Any:
        """Context-compaction observer."""

    @hookspec
    def service_start(self, deps: Any) -> Any:
        """Gateway-lifetime service start."""

    @hookspec
    def service_stop(self) -> Any:
        """Gateway-lifetime service stop."""

    @hookspec
    def router(self) -> Any:
        """One contributed HTTP router."""


@dataclass(frozen=True)
class ContributionKind:
    """How one ``ExtensionRegistry`` method maps onto hooks.

    ``hooks`` pairs each hook name with the contributor's method name; ``field`` is the
    ``LoadedExtensions`` attribute the frozen contributions end up in; ``task_scoped``
    kinds are the ones that make a run allocate a task store.
    """

    registry_method: str
    field: str
    hooks: tuple[tuple[str, str], ...]
    task_scoped: bool


KINDS: dict[str, ContributionKind] = {
    kind.registry_method: kind
    for kind in (
        ContributionKind("middlewares", "middlewares", (("contribute_middlewares", "contribute_middlewares"),), True),
        ContributionKind(
            "task_lifecycle",
            "task_lifecycle",
            (("on_task_start", "on_task_start"), ("on_task_stop", "on_task_stop")),
            True,
        ),
        ContributionKind(
            "system_model_observer",
            "system_model_observers",
            (("on_system_model_call", "on_system_model_call"),),
            True,
        ),
        ContributionKind(
            "agent_assembly_observer", "assembly_observers", (("on_agent_assembled", "on_agent_assembled"),), False
        ),
        ContributionKind(
            "context_compaction_observer",
            "compaction_observers",
            (("on_context_compacted", "on_context_compacted"),),
            True,
        ),
        ContributionKind("service", "services", (("service_start", "start"), ("service_stop", "stop")), False),
        ContributionKind("routers", "routers", (("router", ""),), False),
    )
}


SPEC_ARGNAMES: dict[str, tuple[str, ...]] = {
    name: tuple(inspect.signature(function).parameters)[1:]  # without self
    for name, function in vars(ContributionSpecs).items()
    if callable(function) and not name.startswith("_")
}
"""Each hook's contract arguments, in the order the host passes them (positionally)."""
