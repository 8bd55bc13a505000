"""Recovering the live task store inside a LangGraph run.

Middleware and the host's system-call sites receive a LangGraph ``Runtime``, not the
task store, so the host publishes the store on the runtime's context under a
well-known key. Runtime context is caller-mergeable and its shape depends on how the
graph was invoked, so reading it back is defensive at every step.

The module name and the key are DeerFlow's own (``runtime_bridge``,
``"__deerflow_extension_task_store"``): an extension written for DeerFlow imports and
reads them unchanged. ``deerflow_extension_api.runtime`` re-exports the same objects.
"""

from __future__ import annotations

from collections.abc import Mapping

from .data import ExtensionData

__all__ = ["EXTENSION_TASK_STORE_KEY", "task_store_from_runtime"]

EXTENSION_TASK_STORE_KEY = "__deerflow_extension_task_store"


def task_store_from_runtime(runtime: object) -> ExtensionData | None:
    """Return the task store published on ``runtime.context``, or ``None``.

    ``context`` may be a mapping (looked up by key) or an object (attribute named by
    the key). ``None`` at any step, a missing key, or a value that is not an
    :class:`ExtensionData` all yield ``None``: there is no live task store, and a
    caller-supplied value of the wrong type is never trusted.
    """
    if runtime is None:
        return None
    context = getattr(runtime, "context", None)
    if context is None:
        return None
    if isinstance(context, Mapping):
        store = context.get(EXTENSION_TASK_STORE_KEY)
    else:
        store = getattr(context, EXTENSION_TASK_STORE_KEY, None)
    return store if isinstance(store, ExtensionData) else None
