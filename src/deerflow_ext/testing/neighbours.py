"""A neighbour extension built from the contract, whose behaviour is its ``config:``.

The property checks put these next to the extensions under test. Each is an ordinary
``plugins:`` entry — ``use: deerflow_ext.testing.neighbours:install`` — configured to
contribute one kind of thing and to behave one way, so a counterexample is a list an
operator pastes into a real ``config.yaml`` and sees fail the same way in a real Gateway::

    - name: neighbour-1
      use: deerflow_ext.testing.neighbours:install
      config: {contributes: task_lifecycle, behaviour: hangs, hook: on_task_start}

``contributes``
    ``middlewares`` (one middleware; ``hook`` is ``wrap_model_call``, ``wrap_tool_call``,
    ``before_model`` or ``after_model``, with ``placement``, ``scope`` and ``order``),
    ``task_lifecycle`` (``hook`` ``on_task_start`` or ``on_task_stop`` behaves, the other
    returns; both behave when it is omitted), ``system_model_observer``,
    ``agent_assembly_observer``, ``context_compaction_observer``, ``service`` or
    ``routers``. A list registers one of each, in order — with ``fails_after: N``, the
    install raises after its N-th registration: an install failure at that step.
``behaviour``
    ``returns``; ``raises`` (``RuntimeError``); ``hangs`` (sleeps until the notification
    budget cancels it — lifecycle hooks only, the one contribution the host bounds);
    ``cancels`` (raises its own ``CancelledError`` after suspending once); ``exits``
    (raises ``SystemExit``). ``after_handler: true`` makes a wrap hook behave after the
    downstream call returned instead of before it.

Nothing here keeps state or touches the stores: a neighbour is only ever a source of the
failures the host promises to contain, never a participant in the result being checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import (
    AgentBuildContext,
    AgentScope,
    ExtensionData,
    ExtensionRegistry,
    ExtensionRuntimeDeps,
    MiddlewarePlacement,
    Placement,
    extension,
)

__all__ = [
    "BEHAVIOURS",
    "CONTRIBUTIONS",
    "LIFECYCLE_HOOKS",
    "MIDDLEWARE_HOOKS",
    "NEIGHBOUR_USE",
    "NeighbourSpec",
    "allowed_behaviours",
    "install",
]

NEIGHBOUR_USE = "deerflow_ext.testing.neighbours:install"
CONTRIBUTIONS = (
    "middlewares",
    "task_lifecycle",
    "system_model_observer",
    "agent_assembly_observer",
    "context_compaction_observer",
    "service",
    "routers",
)
BEHAVIOURS = ("returns", "raises", "cancels", "hangs", "exits")
LIFECYCLE_HOOKS = ("on_task_start", "on_task_stop")
MIDDLEWARE_HOOKS = ("wrap_model_call", "wrap_tool_call", "before_model", "after_model")
_SCOPES = {"LEAD": AgentScope.LEAD, "SUBAGENT": AgentScope.SUBAGENT, "BOTH": AgentScope.BOTH}
_HANG_SECONDS = 3600.0


def allowed_behaviours(contributes: str) -> tuple[str, ...]:
    """What a contribution of this kind may do; the host bounds only lifecycle hooks in time.

    A hanging middleware, observer or service would hang the run or the Gateway itself
    (the spec gives them no budget), so ``hangs`` is a lifecycle behaviour only; a
    synchronous assembly observer cannot suspend, so it cancels without suspending.
    """
    if contributes == "task_lifecycle":
        return BEHAVIOURS
    if contributes == "routers":
        return ("returns",)
    if contributes == "service":
        return ("returns", "raises")
    return ("returns", "raises", "cancels", "exits")


@dataclass(frozen=True)
class NeighbourSpec:
    """A neighbour's ``config:``, validated so a typo is one clear install failure."""

    contributes: tuple[str, ...]
    behaviour: str = "returns"
    hook: str | None = None
    placement: Placement = Placement.STANDARD
    scope: AgentScope = AgentScope.BOTH
    order: int = 0
    after_handler: bool = False
    fails_after: int | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> NeighbourSpec:
        known = {"contributes", "behaviour", "hook", "placement", "scope", "order", "after_handler", "fails_after"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown neighbour config key(s) {unknown}; known: {sorted(known)}")
        raw = config.get("contributes")
        kinds = (raw,) if isinstance(raw, str) else tuple(raw or ())
        bad = [k for k in kinds if k not in CONTRIBUTIONS]
        if not kinds or bad:
            raise ValueError(f"contributes must be one or a list of {list(CONTRIBUTIONS)}; got {raw!r}")
        behaviour = str(config.get("behaviour", "returns"))
        for kind in kinds:
            if behaviour not in allowed_behaviours(kind):
                raise ValueError(f"a {kind} neighbour may be {list(allowed_behaviours(kind))}, not {behaviour!r}")
        hook = config.get("hook")
        hooks = MIDDLEWARE_HOOKS if "middlewares" in kinds else LIFECYCLE_HOOKS
        if hook is not None and hook not in hooks:
            raise ValueError(f"hook must be one of {list(hooks)}; got {hook!r}")
        try:
            placement = Placement[str(config.get("placement", "STANDARD"))]
            scope = _SCOPES[str(config.get("scope", "BOTH"))]
        except KeyError as exc:
            raise ValueError(
                f"placement must be one of {[p.name for p in Placement]}, scope one of {list(_SCOPES)}: {exc}"
            ) from None
        fails_after = config.get("fails_after")
        if fails_after is not None and not (isinstance(fails_after, int) and 0 <= fails_after <= len(kinds)):
            raise ValueError(f"fails_after must be a whole number from 0 to {len(kinds)}; got {fails_after!r}")
        return cls(
            kinds,
            behaviour,
            hook,
            placement,
            scope,
            int(config.get("order", 0)),
            bool(config.get("after_handler", False)),
            fails_after,
        )

    def behaves_in(self, hook: str) -> bool:
        return self.hook is None or self.hook == hook


# -- behaving -------------------------------------------------------------------------------
def _misbehave_now(spec: NeighbourSpec, where: str) -> None:
    """The synchronous part of a behaviour: raise what the neighbour raises, if anything."""
    if spec.behaviour == "raises":
        raise RuntimeError(f"neighbour raises in {where}")
    if spec.behaviour == "exits":
        raise SystemExit(f"neighbour exits in {where}")
    if spec.behaviour == "cancels":
        raise asyncio.CancelledError()


async def _misbehave(spec: NeighbourSpec, where: str) -> None:
    if spec.behaviour == "hangs":
        await asyncio.sleep(_HANG_SECONDS)
    elif spec.behaviour == "cancels":
        await asyncio.sleep(0)  # suspend first: the contributor is on the full notification path
    _misbehave_now(spec, where)


class _Neighbour:
    """A contributor of one kind, behaving as its spec says.

    Its hooks are told what the contract passes and use none of it (a neighbour reads and
    writes nothing), so they take it as ``*told``: the host checks at registration that a
    hook can be called with the contract's arguments, and ``*told`` always can.
    """

    def __init__(self, spec: NeighbourSpec) -> None:
        self.spec = spec


class _Lifecycle(_Neighbour):
    async def on_task_start(self, *told: object) -> None:
        if self.spec.behaves_in("on_task_start"):
            await _misbehave(self.spec, "on_task_start")

    async def on_task_stop(self, *told: object) -> None:
        if self.spec.behaves_in("on_task_stop"):
            await _misbehave(self.spec, "on_task_stop")


class _SystemObserver(_Neighbour):
    async def on_system_model_call(self, *told: object) -> None:
        await _misbehave(self.spec, "on_system_model_call")


class _AssemblyObserver(_Neighbour):
    def on_agent_assembled(self, *told: object) -> None:
        _misbehave_now(self.spec, "on_agent_assembled")


class _CompactionObserver(_Neighbour):
    async def on_context_compacted(self, *told: object) -> None:
        await _misbehave(self.spec, "on_context_compacted")


class _Service(_Neighbour):
    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        _misbehave_now(self.spec, "start")

    async def stop(self) -> None:
        return None


# -- middleware: one class per hook, because the host mirrors the hooks a class overrides ----
class _NeighbourMiddleware(AgentMiddleware):
    def __init__(self, spec: NeighbourSpec) -> None:
        super().__init__()
        self.spec = spec

    def _wrap(self, hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
        if not self.spec.after_handler:
            _misbehave_now(self.spec, hook)
            return handler(request)
        result = handler(request)
        _misbehave_now(self.spec, hook)
        return result

    async def _awrap(self, hook: str, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if not self.spec.after_handler:
            await _misbehave(self.spec, hook)
            return await handler(request)
        result = await handler(request)
        await _misbehave(self.spec, hook)
        return result


class NeighbourModelWrap(_NeighbourMiddleware):
    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._wrap("wrap_model_call", request, handler)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._awrap("wrap_model_call", request, handler)


class NeighbourToolWrap(_NeighbourMiddleware):
    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._wrap("wrap_tool_call", request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._awrap("wrap_tool_call", request, handler)


class NeighbourBeforeModel(_NeighbourMiddleware):
    def before_model(self, state: Any, runtime: Any) -> None:
        _misbehave_now(self.spec, "before_model")

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        await _misbehave(self.spec, "before_model")


class NeighbourAfterModel(_NeighbourMiddleware):
    def after_model(self, state: Any, runtime: Any) -> None:
        _misbehave_now(self.spec, "after_model")

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        await _misbehave(self.spec, "after_model")


_MIDDLEWARE_CLASSES: dict[str, type[_NeighbourMiddleware]] = {
    "wrap_model_call": NeighbourModelWrap,
    "wrap_tool_call": NeighbourToolWrap,
    "before_model": NeighbourBeforeModel,
    "after_model": NeighbourAfterModel,
}


class _Middlewares(_Neighbour):
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        middleware = _MIDDLEWARE_CLASSES[self.spec.hook or "wrap_model_call"](self.spec)
        return (MiddlewarePlacement(middleware, self.spec.placement, self.spec.scope, self.spec.order),)


def _router() -> Any:
    # A router with no routes: registering it is the point, and it can never shadow anything.
    from fastapi import APIRouter

    return APIRouter()


_REGISTER: dict[str, Callable[[ExtensionRegistry, NeighbourSpec], None]] = {
    "middlewares": lambda registry, spec: registry.middlewares(_Middlewares(spec)),
    "task_lifecycle": lambda registry, spec: registry.task_lifecycle(_Lifecycle(spec)),
    "system_model_observer": lambda registry, spec: registry.system_model_observer(_SystemObserver(spec)),
    "agent_assembly_observer": lambda registry, spec: registry.agent_assembly_observer(_AssemblyObserver(spec)),
    "context_compaction_observer": lambda registry, spec: registry.context_compaction_observer(
        _CompactionObserver(spec)
    ),
    "service": lambda registry, spec: registry.service(_Service(spec)),
    "routers": lambda registry, spec: registry.routers([_router()]),
}


@extension(api="0.2.0", name="neighbour")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register what ``config`` describes; raise after the ``fails_after``-th registration."""
    spec = NeighbourSpec.from_config(config)
    for step, kind in enumerate(spec.contributes):
        if spec.fails_after == step:
            raise RuntimeError(f"neighbour install fails after {step} registration(s)")
        _REGISTER[kind](registry, spec)
    if spec.fails_after == len(spec.contributes):
        raise RuntimeError(f"neighbour install fails after {len(spec.contributes)} registration(s)")
