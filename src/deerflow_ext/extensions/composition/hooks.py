"""The middleware hooks as ``create_agent`` sees them: names, pairs, detection, node names.

``create_agent`` decides which graph nodes and wrapper chains to build by comparing *class
attributes* against ``AgentMiddleware``'s (``m.__class__.before_model is not
AgentMiddleware.before_model``). Isolation, fusing, carrying and the ordering check all
need that same test and the same hook vocabulary; this is its one copy.
"""

from __future__ import annotations

import re

from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.memo import ClassMemo, Memo

__all__ = [
    "ASYNC_HOOKS",
    "STATE_HOOKS",
    "WRAP_HOOKS",
    "WRAP_HOOK_PAIRS",
    "implemented_hooks",
    "node_name",
    "node_slug",
]

#: The node hooks (``before_*`` / ``after_*``), each with its own sync and async side.
STATE_HOOKS: tuple[str, ...] = (
    "before_agent",
    "abefore_agent",
    "before_model",
    "abefore_model",
    "after_model",
    "aafter_model",
    "after_agent",
    "aafter_agent",
)
#: Wrap hooks as (sync, async) pairs LangChain treats as one capability.
WRAP_HOOK_PAIRS: tuple[tuple[str, str], ...] = (
    ("wrap_model_call", "awrap_model_call"),
    ("wrap_tool_call", "awrap_tool_call"),
)
WRAP_HOOKS = frozenset(hook for pair in WRAP_HOOK_PAIRS for hook in pair)
#: The async side of every hook: a stand-in for a middleware defines these as coroutines.
ASYNC_HOOKS = frozenset((*STATE_HOOKS[1::2], *(pair[1] for pair in WRAP_HOOK_PAIRS)))


def _implemented(cls: type) -> frozenset[str]:
    names = [*STATE_HOOKS, *(hook for pair in WRAP_HOOK_PAIRS for hook in pair)]
    return frozenset(name for name in names if getattr(cls, name, None) is not getattr(AgentMiddleware, name))


_implemented_hooks: ClassMemo[frozenset[str]] = ClassMemo(_implemented)


def implemented_hooks(cls: type) -> frozenset[str]:
    """The hook names ``cls`` overrides, exactly as ``create_agent`` would detect them.

    Once per class (``memo.py``): the ordering check and node fusion ask it for every
    middleware of every construction. A class's hooks are fixed once it is in use (reuse's
    slot classes and mirror's wrapper classes are built from them once, too).
    """
    hooks = _implemented_hooks.get(cls)  # the memo's own lookup, inline: one call less
    return _implemented_hooks.load(cls) if hooks is None else hooks


def node_slug(text: str) -> str:
    """A graph-node-safe fragment: LangGraph reserves ``|`` and ``:`` in node names.

    Memoised (``memo.py``): the same extension and class names are slugged for every
    contribution of every construction, four times each.
    """
    slug = _slugs.get(text)
    return _slugs.put(text, _slug(text)) if slug is None else slug


def node_name(extension: str, class_name: str, index: int) -> str:
    """A contribution's node-name prefix, ``ext_<slug>_<ClassName>_<n>`` (memoised: every
    construction asks it for every contribution slot)."""
    key = (extension, class_name, index)
    name = _node_names.get(key)
    if name is None:
        name = _node_names.put(key, f"ext_{node_slug(extension)}_{node_slug(class_name)}_{index}")
    return name


_node_names: Memo[tuple[str, str, int], str] = Memo()


def _slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_") or "x"


_slugs: Memo[str, str] = Memo()
