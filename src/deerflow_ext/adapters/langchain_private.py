"""LangChain's private agent-factory helpers (``langchain.agents.factory``).

Used by fusing and carrying (``extensions/composition/wrap_fusion.py``, ``extensions/composition/carry.py``):

* the four **chain composers** ``_chain_model_call_handlers``,
  ``_chain_async_model_call_handlers``, ``_chain_tool_call_wrappers``,
  ``_chain_async_tool_call_wrappers`` — ``(handlers: Sequence[wrap hook]) -> composed | None``
  — the exact nesting, result normalisation and command accumulation ``create_agent`` gives
  separate layers, so a fused group behaves as its members did;
* ``_wrap_trace_kwargs(middleware) -> dict`` — the ``traceable`` keyword arguments
  (``process_inputs``/``process_outputs``) ``create_agent`` puts on each wrap hook, so a
  carried group records the same LangSmith span.

Fallback: without the composers nothing is fused (every contribution stays its own
LangChain layer); without the trace helper nothing is carried (a fused group stays one
layer). Both only cost speed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LANGCHAIN_COMPOSER_NAMES", "chain_composers", "wrap_trace_kwargs"]

#: Wrap hook -> the private composer ``create_agent`` chains that hook's layers with.
LANGCHAIN_COMPOSER_NAMES: Mapping[str, str] = {
    "wrap_model_call": "_chain_model_call_handlers",
    "awrap_model_call": "_chain_async_model_call_handlers",
    "wrap_tool_call": "_chain_tool_call_wrappers",
    "awrap_tool_call": "_chain_async_tool_call_wrappers",
}


def chain_composers() -> Mapping[str, Callable[[Any], Any]] | None:
    """Each wrap hook's composer, or ``None`` when this LangChain lacks any of them."""
    try:
        from langchain.agents import factory
    except ImportError:
        return None
    found = {hook: getattr(factory, name, None) for hook, name in LANGCHAIN_COMPOSER_NAMES.items()}
    composers = {hook: composer for hook, composer in found.items() if callable(composer)}
    return composers if len(composers) == len(found) else None


def wrap_trace_kwargs(middleware: Any) -> dict[str, Any] | None:
    """``create_agent``'s ``traceable`` kwargs for ``middleware``'s wrap hooks, or ``None``
    when this LangChain lacks the helper or it no longer answers in that shape."""
    try:
        from langchain.agents.factory import _wrap_trace_kwargs
    except ImportError:
        return None
    kwargs = _wrap_trace_kwargs(middleware)
    if not isinstance(kwargs, dict) or not {"process_inputs", "process_outputs"} <= kwargs.keys():
        return None
    return kwargs
