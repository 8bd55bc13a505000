"""The runtime bridge under its earlier name: the same objects as :mod:`.runtime_bridge`."""

from __future__ import annotations

from .runtime_bridge import EXTENSION_TASK_STORE_KEY, task_store_from_runtime

__all__ = ["EXTENSION_TASK_STORE_KEY", "task_store_from_runtime"]
