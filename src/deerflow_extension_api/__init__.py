"""The public contract between DeerFlow and its extensions.

Extension packages depend on this package alone: it has no runtime dependencies
outside the standard library and never imports the host, so an extension can be
installed, type-checked and unit-tested without DeerFlow. Every protocol method has a
default body and every optional dataclass field a default, so additive releases keep
existing extensions working.
"""

from __future__ import annotations

from ._version import API_VERSION
from .agent_runs import (
    AGENT_RUNS_CONTEXT_KEY,
    AGENT_RUNS_RESOLVER_KEY,
    AgentRun,
    AgentRunError,
    AgentRuns,
    require_agent_runs,
    resolve_agent_runs,
)
from .assembly import (
    AgentAssemblyDescriptor,
    AgentAssemblyObserver,
    MiddlewareDescriptor,
    ToolDescriptor,
)
from .auth import (
    EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY,
    EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY,
    EXTENSION_PRINCIPAL_RESOLVER_KEY,
    ExtensionPrincipal,
    arequire_plugin_management,
    require_admin,
    require_plugin_management,
    resolve_principal,
)
from .batch_results import (
    BATCH_RESULTS_RESOLVER_KEY,
    BatchResultError,
    BatchResultReader,
    require_batch_results,
    resolve_batch_results,
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
from .model_invocation import (
    ModelInvocationError,
    ModelInvocationFailed,
    ModelInvocationRequest,
    ModelInvocationResult,
    ModelInvocationUnauthorized,
    ModelInvocationUnavailable,
    ModelInvoker,
    ModelMessage,
    ModelOutputValidationError,
    ModelUsage,
)
from .plugins import (
    ActionContext,
    BackendAction,
    BrowserAssets,
    BrowserModule,
    ModelTool,
    PluginContribution,
    ToolContext,
)
from .policy import HostPolicySnapshot
from .provenance import (
    MESSAGE_CONTENT_KIND_KEY,
    MESSAGE_PRODUCER_ENTITY_ID_KEY,
    MESSAGE_PRODUCER_KIND_KEY,
    PROVENANCE_KEYS,
    ContentKind,
    MessageProvenance,
    provenance_kwargs,
    read_provenance,
)
from .registry import ExtensionRegistry
from .release import ReleasePolicyProvider, canonical_hash, canonical_json, collect_release_policies
from .run_evidence import (
    RUN_EVIDENCE_READER_RESOLVER_KEY,
    InvalidRunEvidenceCursor,
    RunEventPage,
    RunEventView,
    RunEvidenceReader,
    RunPage,
    RunStatusView,
    require_run_evidence_reader,
    resolve_run_evidence_reader,
)
from .runtime_bridge import EXTENSION_TASK_STORE_KEY, task_store_from_runtime
from .services import ExtensionRuntimeDeps, ExtensionService
from .settings import SettingsField
from .system import (
    SystemModelCallObserver,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
)

__all__ = [
    "AGENT_RUNS_CONTEXT_KEY",
    "AGENT_RUNS_RESOLVER_KEY",
    "API_VERSION",
    "BATCH_RESULTS_RESOLVER_KEY",
    "EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY",
    "EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY",
    "EXTENSION_PRINCIPAL_RESOLVER_KEY",
    "EXTENSION_TASK_STORE_KEY",
    "MESSAGE_CONTENT_KIND_KEY",
    "MESSAGE_PRODUCER_ENTITY_ID_KEY",
    "MESSAGE_PRODUCER_KIND_KEY",
    "PROVENANCE_KEYS",
    "RUN_EVIDENCE_READER_RESOLVER_KEY",
    "ActionContext",
    "AgentAssemblyDescriptor",
    "AgentAssemblyObserver",
    "AgentBuildContext",
    "AgentRun",
    "AgentRunError",
    "AgentRuns",
    "AgentScope",
    "BackendAction",
    "BatchResultError",
    "BatchResultReader",
    "BrowserAssets",
    "BrowserModule",
    "CompactionEvent",
    "ContentKind",
    "ContextCompactionObserver",
    "ExtensionData",
    "ExtensionInstall",
    "ExtensionPrincipal",
    "ExtensionRegistry",
    "ExtensionRuntimeDeps",
    "ExtensionService",
    "HostPolicySnapshot",
    "InvalidRunEvidenceCursor",
    "MessageProvenance",
    "MiddlewareContributor",
    "MiddlewareDescriptor",
    "MiddlewarePlacement",
    "ModelInvocationError",
    "ModelInvocationFailed",
    "ModelInvocationRequest",
    "ModelInvocationResult",
    "ModelInvocationUnauthorized",
    "ModelInvocationUnavailable",
    "ModelInvoker",
    "ModelMessage",
    "ModelOutputValidationError",
    "ModelTool",
    "ModelUsage",
    "Placement",
    "PluginContribution",
    "ReleasePolicyProvider",
    "RunEventPage",
    "RunEventView",
    "RunEvidenceReader",
    "RunPage",
    "RunStatusView",
    "SettingsField",
    "SystemModelCallObserver",
    "SystemModelRequest",
    "SystemModelResult",
    "SystemOperationKind",
    "TaskInfo",
    "TaskLifecycleContributor",
    "TaskOutcome",
    "ToolContext",
    "ToolDescriptor",
    "arequire_plugin_management",
    "canonical_hash",
    "canonical_json",
    "collect_release_policies",
    "extension",
    "provenance_kwargs",
    "read_provenance",
    "require_admin",
    "require_agent_runs",
    "require_batch_results",
    "require_plugin_management",
    "require_run_evidence_reader",
    "resolve_agent_runs",
    "resolve_batch_results",
    "resolve_principal",
    "resolve_run_evidence_reader",
    "task_store_from_runtime",
]
