"""LangSmith's per-hook bookkeeping, run inline when the call is not traced.

``create_agent`` decorates every ``wrap_*`` hook of every middleware layer with langsmith's
``traceable``. On the async path each call of such a hook then sends two small functions
(set up the run, end the run) to a thread pool with ``run_in_executor`` and runs the hook
itself in a new task. That is the right thing when a span is recorded: ending a run may
touch the LangSmith client. With tracing off (the host's default: no ``LANGSMITH_TRACING``)
both functions only decide that there is nothing to record, yet each model and tool call
still pays two thread-pool round trips per layer — about a tenth of a millisecond, the
largest per-layer cost of a run, and the cost that grows with every contributed layer.

langsmith provides a public hook for its async-to-thread step
(``langsmith.set_runtime_overrides``); reading back the override installed before ours is
private, and goes through ``adapters/langsmith_private.py``. The host installs one that runs the step inline, in
the context langsmith gave it, when tracing is not enabled in that context, and defers to
langsmith's default (or to an override installed before ours) whenever it is. Traced runs
are unchanged; untraced runs skip the round trips and the extra task.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from deerflow_ext.adapters.langsmith_private import UNREADABLE, installed_aio_to_thread

__all__ = ["install_inline_untraced_bookkeeping"]

_installed = False
_lock = threading.Lock()


def install_inline_untraced_bookkeeping() -> bool:
    """Install the override once per process; ``False`` when langsmith lacks the hook.

    Called by every agent construction (a flag check after the first), so both the Gateway
    and ``DeerFlowClient`` get it without an import-time side effect.
    """
    global _installed
    if _installed:
        return True
    with _lock:
        if _installed:
            return True
        try:
            import langsmith
            from langsmith import utils as langsmith_utils
        except ImportError:
            return False
        previous = installed_aio_to_thread()
        if previous is UNREADABLE or not hasattr(langsmith, "set_runtime_overrides"):
            return False  # an older langsmith: keep its default behaviour (adapters/langsmith_private.py)
        tracing_is_enabled = langsmith_utils.tracing_is_enabled

        async def aio_to_thread(
            default: Callable[..., Awaitable[Any]],
            ctx: contextvars.Context,
            func: Callable[..., Any],
            /,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            # "local" (trace without sending) is truthy and keeps the default path too.
            if ctx.run(tracing_is_enabled):
                if previous is not None:
                    return await previous(default, ctx, func, *args, **kwargs)
                return await default(ctx, func, *args, **kwargs)
            return ctx.run(func, *args, **kwargs)

        langsmith.set_runtime_overrides(aio_to_thread=aio_to_thread)
        _installed = True
        return True
