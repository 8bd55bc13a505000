"""The LangGraph runtime context of a host run, and how it is assembled.

The context is a plain dict so both ``task_store_from_runtime`` and
``resolve_run_extensions`` (which read mappings or attributes) work unchanged, and so a
caller's own keys survive. Host keys are written *after* the caller's values are merged:
the runtime context is caller-mergeable, and a caller must never be able to supply the
task store, the extension snapshot or the run identity the host's hooks will trust.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from deerflow_ext.extensions.contract.snapshot import (
    EXTENSION_SNAPSHOT_CONTEXT_KEY,
    LoadedExtensions,
    context_get,
    publish_snapshot,
)
from deerflow_extension_api import EXTENSION_TASK_STORE_KEY, ExtensionData

__all__ = ["RunContext", "build_run_context", "context_value"]

# Functional syntax: the two extension keys are not identifiers.
RunContext = TypedDict(
    "RunContext",
    {
        "thread_id": str | None,
        "run_id": str | None,
        "task_id": str | None,
        "agent_name": str,
        "user_id": str,
        "sandbox_lease": Any,
        # mypy takes literal keys only; these two are the contract's and the snapshot's names.
        EXTENSION_TASK_STORE_KEY: ExtensionData,  # type: ignore[misc]
        EXTENSION_SNAPSHOT_CONTEXT_KEY: LoadedExtensions,
    },
    total=False,
)

_HOST_KEYS = ("thread_id", "run_id", "task_id", "agent_name", "user_id", "sandbox_lease", EXTENSION_TASK_STORE_KEY)


def build_run_context(
    caller: Mapping[str, Any] | None,
    *,
    thread_id: str | None,
    run_id: str | None,
    task_id: str | None,
    agent_name: str,
    task_store: ExtensionData | None,
    extensions: LoadedExtensions | None,
    sandbox_lease: Any = None,
    user_id: str | None = None,
) -> dict[str, Any]:
    """Caller values first, then the host's: a caller value under a host key never wins.

    ``user_id`` is whose run it is (DeerFlow's runtime-context key, which plugin tools read
    for their principal): absent when the host records none, never the caller's."""
    context: dict[str, Any] = dict(caller or {})
    for key in _HOST_KEYS:
        context.pop(key, None)
    context.update(thread_id=thread_id, run_id=run_id, task_id=task_id, agent_name=agent_name)
    if user_id is not None:
        context["user_id"] = user_id
    if sandbox_lease is not None:
        context["sandbox_lease"] = sandbox_lease
    if task_store is not None:
        context[EXTENSION_TASK_STORE_KEY] = task_store
    publish_snapshot(context, extensions)
    return context


def context_value(runtime: object, key: str, default: Any = None) -> Any:
    """``runtime.context[key]`` for dict or attribute contexts; ``default`` when absent."""
    return context_get(getattr(runtime, "context", None), key, default)
