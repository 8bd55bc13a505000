"""The four observer contributions from DeerFlow's *Lifecycle and Observers* chapter.

One extension registers all four so an operator can enable them with one ``plugins:``
entry (``use: observers``) and watch the host's life in the Gateway log. None of them
can change what the host does; all of them only keep bookkeeping in the stores and log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import ExtensionRegistry, extension

from .observers import (
    AssemblyDriftWatcher,
    CompactionLogger,
    Fingerprints,
    OutcomeTally,
    RunClock,
    SystemCallLogger,
    TaskTimer,
    logger,
)

__all__ = [
    "AssemblyDriftWatcher",
    "CompactionLogger",
    "Fingerprints",
    "OutcomeTally",
    "RunClock",
    "SystemCallLogger",
    "TaskTimer",
    "install",
    "logger",
]


@extension(api="0.2.0", name="observers")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register the task timer, system-call logger, drift watcher and compaction logger."""
    registry.task_lifecycle(TaskTimer())
    registry.system_model_observer(SystemCallLogger())
    registry.agent_assembly_observer(AssemblyDriftWatcher())
    registry.context_compaction_observer(CompactionLogger())
