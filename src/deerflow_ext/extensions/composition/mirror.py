"""Generated wrapper classes that look, to LangChain, exactly like the middleware they wrap.

The spec's "the wrapper exposes exactly the inner middleware's hooks" (docs/SPEC.md,
"Runtime slice": isolation of contributed middleware) is kept here, for the per-class
wrappers and for a fused group's classes; the classes themselves are made by the one class
generator, ``hook_classes.py``.

``create_agent`` builds a node or a wrapper chain for each hook a middleware's *class*
overrides (``hooks.implemented_hooks``). A single wrapper class that defined every hook
would add a node for every hook of every contribution, and one that defined none would hide
them all. So one subclass of the wrapper (``base``: ``IsolatedMiddleware``) is generated per
inner class, defining precisely the hooks the inner class overrides, with their
``__can_jump_to__``, so conditional edges survive; a wrap hook whose other side is
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
from collections.abc import Callable
from typing import Any, TypeVar

from deerflow_ext.memo import ClassKeyMemo, ClassMemo

from .hook_classes import Call, hook_class, hook_method, jump_targets
from .hooks import ASYNC_HOOKS, WRAP_HOOK_PAIRS, WRAP_HOOKS, implemented_hooks

__all__ = ["group_head_class", "group_member_class", "isolated_class", "isolated_hook", "isolated_step"]

W = TypeVar("W", bound=type)
Axes = tuple[tuple[str, str], ...]


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
        own: Callable[..., Any] = wrapper._arun_wrap_hook if hook in ASYNC_HOOKS else wrapper._run_wrap_hook
        return own
    return functools.partial(_passed_through, isolated_hook(wrapper, hook))


def _passed_through(method: Callable[..., Any], hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
    """A generated pass-through called as a step: it knows its hook already."""
    return method(request, handler)


def group_head_class(base: W, inner_cls: type, axes: Axes) -> W:
    """The class of a fused group's head: it exposes the group's wrap hooks on ``axes``."""
    return _heads(inner_cls, (base, axes))  # type: ignore[return-value]


def _build_head_class(inner_cls: type, key: tuple[type, Axes]) -> type:
    base, axes = key
    methods = {hook: group_method(hook) for pair in axes for hook in pair}
    attributes = {"_hooks": implemented_hooks(inner_cls)}
    return hook_class(base, f"Isolated{inner_cls.__name__}Group", methods, attributes=attributes)


def group_member_class(base: W, inner_cls: type) -> W:
    """The class of a fused group's member: it exposes no hook (the head runs it)."""
    cls = _members.get(inner_cls)
    return _members.load(inner_cls, base) if cls is None else cls  # type: ignore[return-value]


def _build_member_class(inner_cls: type, base: type) -> type:
    attributes = {"_hooks": implemented_hooks(inner_cls)}
    return hook_class(base, f"Isolated{inner_cls.__name__}InGroup", {}, attributes=attributes)


@functools.cache
def group_method(hook: str) -> Callable[..., Any]:
    """A group head's wrap hook: the group's composed chain for ``hook``.

    One function per hook, shared by every head class (and by carrying, per construction).
    """
    return hook_method(hook, _group_call)


def _group_call(self: Any, hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
    return self._group_calls[hook](request, handler)


def _pass_through(self: Any, hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
    """The missing side of a one-sided wrap hook: the call goes on, untouched."""
    return handler(request)


def _build_class(inner_cls: type, base: type) -> type:
    """The wrapper of ``inner_cls``: its hooks forwarded to ``base``'s runners, each wrap
    pair completed with a pass-through."""
    hooks = implemented_hooks(inner_cls)
    methods = {hook: hook_method(hook, _runner(base, hook)) for hook in hooks}
    for pair in WRAP_HOOK_PAIRS:
        if hooks & set(pair):
            for hook in pair:
                methods.setdefault(hook, hook_method(hook, _pass_through))
    attributes = {"_hooks": hooks}
    jumps = jump_targets(inner_cls, hooks)
    return hook_class(base, f"Isolated{inner_cls.__name__}", methods, jumps=jumps, attributes=attributes)


def _runner(base: type, hook: str) -> Call:
    """``base``'s runner for ``hook``, by name: ``_run_state_hook``, ``_arun_wrap_hook``..."""
    prefix = "_arun" if hook in ASYNC_HOOKS else "_run"
    runner: Call = getattr(base, f"{prefix}_{'wrap' if hook in WRAP_HOOKS else 'state'}_hook")
    return runner


#: The per-class wrappers and the group-member classes, by inner class.
_classes: ClassMemo[type] = ClassMemo(_build_class)
_members: ClassMemo[type] = ClassMemo(_build_member_class)
#: A fused group head's classes, by inner class, then by the base and the axes it exposes.
_heads: ClassKeyMemo[tuple[type, Axes], type] = ClassKeyMemo(_build_head_class)
