"""Gateway-lifetime services.

Work that must not sit on a run's path (flushing buffers, talking to slow backends)
belongs in a service the Gateway starts and stops, on the loop that owns its resources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .policy import HostPolicySnapshot

if TYPE_CHECKING:
    from .data import ExtensionData
    from .model_invocation import ModelInvoker
    from .run_evidence import RunEvidenceReader

__all__ = ["ExtensionRuntimeDeps", "ExtensionService"]


@dataclass(frozen=True, slots=True)
class ExtensionRuntimeDeps:
    """What the host lends a service when it starts.

    ``session_factory`` is the host's SQLAlchemy async session factory, typed ``Any``
    so the contract does not depend on SQLAlchemy; it is ``None`` when the host runs
    without a database. ``run_evidence_reader`` reads every run (it is for trusted
    services; a route asks for a caller-bound reader instead) and ``model_invoker`` is
    present only when the operator granted this extension model roles; both are ``None``
    on a host that does not provide them.
    """

    app_store: ExtensionData | None = None
    policy: HostPolicySnapshot = field(default_factory=HostPolicySnapshot)
    session_factory: Any = None
    run_evidence_reader: RunEvidenceReader | None = None
    model_invoker: ModelInvoker | None = None


@runtime_checkable
class ExtensionService(Protocol):
    """Started with the Gateway and stopped when it shuts down."""

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        return None

    async def stop(self) -> None:
        return None
