"""The public contract between DeerFlow and its extensions.

Extension packages depend on this package alone: it has no runtime dependencies
outside the standard library and never imports the host, so an extension can be
installed, type-checked and unit-tested without DeerFlow. Every protocol method has a
default body and every optional dataclass field a default, so additive releases keep
existing extensions working.
"""

from __future__ import annotations

from ._version import API_VERSION
from .assembly import (
    AgentAssemblyDescriptor,
    AgentAssemblyObserver,
    MiddlewareDescriptor,
    ToolDescriptor,
)
from .compaction import CompactionEvent, ContextCompactionObserver
from .data import ExtensionData
from .lifecycle import TaskInfo, TaskLifecycleContributor, TaskOutcome
from .marker import ExtensionInstall, extension
from .middleware import (
    AgentBuildContext,
    AgentScope,
    MiddlewareContributor,
    MiddlewarePlacement,
    Placement,
)
from .policy import HostPolicySnapshot
from .registry import ExtensionRegistry
from .release import canonical_hash, canonical_json, collect_release_policies
from .runtime_bridge import EXTENSION_TASK_STORE_KEY, task_store_from_runtime
from .services import ExtensionRuntimeDeps, ExtensionService
from .system import (
    SystemModelCallObserver,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
)

__all__ = [
    "API_VERSION",
    "EXTENSION_TASK_STORE_KEY",
    "AgentAssemblyDescriptor",
    "AgentAssemblyObserver",
    "AgentBuildContext",
    "AgentScope",
    "CompactionEvent",
    "ContextCompactionObserver",
    "ExtensionData",
    "ExtensionInstall",
    "ExtensionRegistry",
    "ExtensionRuntimeDeps",
    "ExtensionService",
    "HostPolicySnapshot",
    "MiddlewareContributor",
    "MiddlewareDescriptor",
    "MiddlewarePlacement",
    "Placement",
    "SystemModelCallObserver",
    "SystemModelRequest",
    "SystemModelResult",
    "SystemOperationKind",
    "TaskInfo",
    "TaskLifecycleContributor",
    "TaskOutcome",
    "ToolDescriptor",
    "canonical_hash",
    "canonical_json",
    "collect_release_policies",
    "extension",
    "task_store_from_runtime",
]
