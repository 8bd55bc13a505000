"""The one class generator: subclasses that expose exactly the LangChain hooks they are given.

``create_agent`` decides a graph's nodes and wrapper chains by the hooks a middleware's
*class* overrides (``hooks.py``). So everything the runtime puts into a graph in another
middleware's place is a class generated with precisely the right hooks: an isolation wrapper
and a fused group's head and members (``mirror.py``), a reused graph's slot
(``agents/reuse.py``), a fused run of host hooks and a fused member's view
(``agents/fused_nodes.py``). Each such class is made here, the same way:

* a method per hook, with LangChain's parameter names for it (LangGraph injects ``runtime``
  by name, and reuse reads the names), sync or ``async def`` as the hook is;
* the jump targets (``__can_jump_to__``) of the hook it stands for, so conditional edges
  survive;
* the base's module, a readable name.

What a generated method *does* is its caller's: a ``call(self, hook, first, second)`` it
forwards to. For an async hook ``call`` returns the awaitable and the method awaits it, so a
forwarding layer adds no coroutine of its own. Caching the classes is each caller's, on the
one memo mechanism (``memo.py``): a caller knows what its classes are keyed by.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langchain.agents.middleware import AgentMiddleware

from .hooks import ASYNC_HOOKS, STATE_HOOKS

__all__ = ["Call", "StandIn", "hook_class", "hook_method", "jump_targets"]

T = TypeVar("T", bound=type)

#: What a generated method forwards to: ``call(self, hook, first, second)`` — ``(state,
#: runtime)`` for a node hook, ``(request, handler)`` for a wrap hook.
Call = Callable[[Any, str, Any, Any], Any]

_STATE_HOOKS = frozenset(STATE_HOOKS)


def hook_method(hook: str, call: Call) -> Callable[..., Any]:
    """A method named ``hook``, with LangChain's parameters for it, returning
    ``call(self, hook, ...)`` (awaited, when ``hook`` is async)."""
    method: Callable[..., Any]
    if hook in _STATE_HOOKS:
        if hook in ASYNC_HOOKS:

            async def astate(self: Any, state: Any, runtime: Any) -> Any:
                return await call(self, hook, state, runtime)

            method = astate
        else:

            def state_hook(self: Any, state: Any, runtime: Any) -> Any:
                return call(self, hook, state, runtime)

            method = state_hook
    elif hook in ASYNC_HOOKS:

        async def awrap(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
            return await call(self, hook, request, handler)

        method = awrap
    else:

        def wrap(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
            return call(self, hook, request, handler)

        method = wrap
    method.__name__ = hook
    return method


def jump_targets(cls: type, hooks: Iterable[str]) -> dict[str, Sequence[str]]:
    """The jump targets ``cls`` declares on each of ``hooks`` that declares some."""
    found: dict[str, Sequence[str]] = {}
    for hook in hooks:
        jump = getattr(getattr(cls, hook, None), "__can_jump_to__", None)
        if jump is not None:
            found[hook] = jump
    return found


def hook_class(
    base: T,
    name: str,
    methods: Mapping[str, Callable[..., Any]],
    *,
    jumps: Mapping[str, Sequence[str]] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> T:
    """A subclass of ``base`` named ``name``, defining ``methods`` and ``attributes``.

    ``jumps`` gives a hook's method its jump targets: the methods must be the new class's own
    (made by :func:`hook_method` for it), since the targets are set on the function.
    """
    namespace: dict[str, Any] = {"__module__": base.__module__, "__qualname__": name}
    namespace.update(attributes or {})
    namespace.update(methods)
    for hook, targets in (jumps or {}).items():
        if hook in methods:
            methods[hook].__can_jump_to__ = list(targets)  # type: ignore[attr-defined]
    made: T = type(name, (base,), namespace)  # type: ignore[assignment]
    return made


class StandIn(AgentMiddleware[Any, Any, Any]):
    """A middleware a graph is compiled over in others' place, under the name it is given
    (LangChain's own ``name`` is the class's, and a generated class's name is not the one
    the graph's nodes must carry). Standing for one middleware (``like``), it also carries
    what ``create_agent`` reads of that one besides its hooks and name: its state schema,
    tools, trace policy and stream transformers."""

    def __init__(self, name: str, like: AgentMiddleware[Any, Any, Any] | None = None) -> None:
        super().__init__()
        self._name = name
        if like is not None:
            self.state_schema = like.state_schema
            self.tools = list(getattr(like, "tools", ()))
            self.trace_policy = like.trace_policy
            self.transformers = tuple(getattr(like, "transformers", ()))

    @property
    def name(self) -> str:
        return self._name
