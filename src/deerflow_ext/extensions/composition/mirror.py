"""Generated wrapper classes that look, to LangChain, exactly like the middleware they wrap.

The one class generator of the extension runtime: the spec's "the wrapper exposes exactly
the inner middleware's hooks" (docs/SPEC.md, "Runtime slice": isolation of contributed
middleware) is kept here, for the per-class wrappers and for a fused group's classes.

``create_agent`` builds a node or a wrapper chain for each hook a middleware's *class*
overrides (``hooks.implemented_hooks``). A single wrapper class that defined every hook
would add a node for every hook of every contribution, and one that defined none would hide
them all. So one subclass of the wrapper (``base``: ``IsolatedMiddleware``) is generated per
inner class, defining precisely the hooks the inner class overrides, with
``__can_jump_to__`` copied so conditional edges survive; a wrap hook whose other side is
missing gets a pass-through (LangChain puts a one-sided middleware in *both* chains, and
the missing side would raise ``NotImplementedError`` on that path). Fused groups
(``wrap_fusion.py``) get classes of their own: a *head* exposing the group's wrap hooks and
*members* exposing none.

The generated methods only forward to the wrapper's own runners by name
(``_run_state_hook``, ``_run_wrap_hook``, ``_group_calls``...): this module knows the
wrapper's shape, not its rules. Classes are cached per inner class, weakly (``memo.py``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..memo import ClassMemo
from .hooks import STATE_HOOKS, WRAP_HOOK_PAIRS, implemented_hooks

__all__ = ["group_head_class", "group_member_class", "isolated_class", "isolated_hook", "isolated_step"]

W = TypeVar("W", bound=type)
Axes = tuple[tuple[str, str], ...]

_ASYNC_STATE_HOOKS = frozenset(STATE_HOOKS[1::2])
_ASYNC_WRAP_HOOKS = frozenset(asynchronous for _, asynchronous in WRAP_HOOK_PAIRS)
_lock = threading.Lock()


def isolated_class(base: W, inner_cls: type) -> W:
    """The subclass of ``base`` that wraps instances of ``inner_cls`` (made once, cached).

    Asked for every contribution of every construction: a hit is one dict lookup
    (``memo.py``); only a class seen for the first time is built, under a lock."""
    cls = _classes.get(inner_cls)
    return _classes.load(inner_cls, base) if cls is None else cls  # type: ignore[return-value]


def isolated_hook(wrapper: Any, hook: str) -> Callable[..., Any]:
    """``wrapper``'s own isolated ``hook``, as its per-class wrapper defines it, bound to it
    (a group head's class exposes the group's hooks instead)."""
    inner_cls = type(wrapper._inner)
    bound: Callable[..., Any] = getattr(_classes.get(inner_cls) or _classes(inner_cls), hook).__get__(wrapper)
    return bound


def isolated_step(wrapper: Any, hook: str) -> Callable[..., Any]:
    """:func:`isolated_hook` for a chain of them, called ``(hook, request, handler)``: the
    wrapper's runner itself, bound, where the generated method would only forward to it (one
    coroutine fewer per member and call, and no ``partial`` binding the hook per member and
    construction), the generated pass-through otherwise."""
    if hook in wrapper._hooks:
        own: Callable[..., Any] = wrapper._arun_wrap_hook if hook in _ASYNC_WRAP_HOOKS else wrapper._run_wrap_hook
        return own
    return functools.partial(_passed_through, isolated_hook(wrapper, hook))


def _passed_through(method: Callable[..., Any], hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
    """A generated pass-through called as a step: it knows its hook already."""
    return method(request, handler)


def group_head_class(base: W, inner_cls: type, axes: Axes) -> W:
    """The class of a fused group's head: it exposes the group's wrap hooks on ``axes``."""
    by_axes = _heads(inner_cls)
    cls = by_axes.get(axes)
    if cls is not None:
        return cls  # type: ignore[return-value]
    with _lock:
        cls = by_axes.get(axes)
        if cls is None:
            namespace: dict[str, Any] = {"_hooks": implemented_hooks(inner_cls), "__module__": base.__module__}
            for pair in axes:
                namespace[pair[0]] = group_method(pair[0])
                namespace[pair[1]] = agroup_method(pair[1])
            name = f"Isolated{inner_cls.__name__}Group"
            namespace["__qualname__"] = name
            cls = by_axes[axes] = type(name, (base,), namespace)
        return cls  # type: ignore[return-value]


def group_member_class(base: W, inner_cls: type) -> W:
    """The class of a fused group's member: it exposes no hook (the head runs it)."""
    cls = _members.get(inner_cls)
    return _members.load(inner_cls, base) if cls is None else cls  # type: ignore[return-value]


def _build_member_class(inner_cls: type, base: type) -> type:
    name = f"Isolated{inner_cls.__name__}InGroup"
    namespace = {"_hooks": implemented_hooks(inner_cls), "__module__": base.__module__, "__qualname__": name}
    return type(name, (base,), namespace)


@functools.cache
def group_method(hook: str) -> Callable[..., Any]:
    """A group head's sync wrap hook: the group's composed chain for ``hook``.

    One function per hook, shared by every head class (and by carrying, per construction).
    """

    def wrap(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._group_calls[hook](request, handler)

    wrap.__name__ = hook
    return wrap


@functools.cache
def agroup_method(hook: str) -> Callable[..., Any]:
    """A group head's async wrap hook: the group's composed chain for ``hook`` (one per hook)."""

    async def awrap(self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._group_calls[hook](request, handler)

    awrap.__name__ = hook
    return awrap


def _build_class(inner_cls: type, base: type) -> type:
    hooks = implemented_hooks(inner_cls)
    namespace: dict[str, Any] = {"_hooks": hooks, "__module__": base.__module__, "__qualname__": ""}
    for hook in STATE_HOOKS:
        if hook in hooks:
            namespace[hook] = _state_method(hook, is_async=hook in _ASYNC_STATE_HOOKS)
    for sync_hook, async_hook in WRAP_HOOK_PAIRS:
        if sync_hook not in hooks and async_hook not in hooks:
            continue
        sync_impl = _wrap_method if sync_hook in hooks else _sync_pass_through
        async_impl = _awrap_method if async_hook in hooks else _async_pass_through
        namespace[sync_hook] = sync_impl(sync_hook)
        namespace[async_hook] = async_impl(async_hook)
    for hook in hooks:
        jump = getattr(getattr(inner_cls, hook, None), "__can_jump_to__", None)
        if jump is not None and hook in namespace:
            namespace[hook].__can_jump_to__ = list(jump)
    name = f"Isolated{inner_cls.__name__}"
    namespace["__qualname__"] = name
    return type(name, (base,), namespace)


#: The per-class wrappers and the group-member classes, by inner class.
_classes: ClassMemo[type] = ClassMemo(_build_class)
_members: ClassMemo[type] = ClassMemo(_build_member_class)
#: A fused group head's classes, by inner class, then by the axes it exposes.
_heads: ClassMemo[dict[Axes, type]] = ClassMemo(lambda inner_cls: {})


def _state_method(hook: str, *, is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def async_hook(self: Any, state: Any, runtime: Any) -> Any:
            return await self._arun_state_hook(hook, state, runtime)

        async_hook.__name__ = hook
        return async_hook

    def sync_hook(self: Any, state: Any, runtime: Any) -> Any:
        return self._run_state_hook(hook, state, runtime)

    sync_hook.__name__ = hook
    return sync_hook


def _wrap_method(hook: str) -> Callable[..., Any]:
    def wrap(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._run_wrap_hook(hook, request, handler)

    wrap.__name__ = hook
    return wrap


def _awrap_method(hook: str) -> Callable[..., Any]:
    async def awrap(self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._arun_wrap_hook(hook, request, handler)

    awrap.__name__ = hook
    return awrap


def _sync_pass_through(hook: str) -> Callable[..., Any]:
    def pass_through(self: Any, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)

    pass_through.__name__ = hook
    return pass_through


def _async_pass_through(hook: str) -> Callable[..., Any]:
    async def pass_through(self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(request)

    pass_through.__name__ = hook
    return pass_through
