"""Where notification stores come from when there is no live task.

Memory extraction runs on a worker thread after the run, and compaction observers are
dispatched outside the turn, so neither has a task store to hand over. They get a *fresh*
detached store per notification, never a shared one: anything written to it is discarded
when the notification ends, which is the spec's promise that a detached store cannot leak
state from one notification into the next. Values that must outlive the call belong in
the app store.
"""

from __future__ import annotations

from deerflow_extension_api import ExtensionData

__all__ = ["DETACHED_SCOPE_ID", "detached_store", "store_or_detached"]

DETACHED_SCOPE_ID = "detached"


def detached_store() -> ExtensionData:
    """A new, empty store whose ``scope_id`` is ``"detached"``."""
    return ExtensionData(DETACHED_SCOPE_ID)


def store_or_detached(task_store: ExtensionData | None) -> ExtensionData:
    """The live task store when there is one, else a fresh detached store."""
    return task_store if task_store is not None else ExtensionData(DETACHED_SCOPE_ID)
