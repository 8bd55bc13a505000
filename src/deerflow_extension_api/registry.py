"""The registry an ``install`` function registers its contributions with.

The host implements it; extensions only call it. Every contribution kind the host runs
has exactly one method here, and the host must run everything it accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .assembly import AgentAssemblyObserver
    from .compaction import ContextCompactionObserver
    from .lifecycle import TaskLifecycleContributor
    from .middleware import MiddlewareContributor
    from .services import ExtensionService
    from .system import SystemModelCallObserver

__all__ = ["ExtensionRegistry"]


def _unsupported(method: str) -> NotImplementedError:
    return NotImplementedError(f"this host does not support ExtensionRegistry.{method}()")


@runtime_checkable
class ExtensionRegistry(Protocol):
    """Where ``install(registry, config)`` registers contributions.

    Unlike the contributor protocols, whose default bodies do nothing, the defaults
    here raise ``NotImplementedError``: a registration the host would silently ignore
    is worse than a failed install, which the host rolls back and reports. A host
    that subclasses this protocol and predates a newer method therefore refuses the
    registration loudly.
    """

    def middlewares(self, contributor: MiddlewareContributor) -> None:
        raise _unsupported("middlewares")

    def task_lifecycle(self, contributor: TaskLifecycleContributor) -> None:
        raise _unsupported("task_lifecycle")

    def system_model_observer(self, observer: SystemModelCallObserver) -> None:
        raise _unsupported("system_model_observer")

    def agent_assembly_observer(self, observer: AgentAssemblyObserver) -> None:
        raise _unsupported("agent_assembly_observer")

    def context_compaction_observer(self, observer: ContextCompactionObserver) -> None:
        raise _unsupported("context_compaction_observer")

    def service(self, service: ExtensionService) -> None:
        raise _unsupported("service")

    def routers(self, routers: Sequence[Any]) -> None:
        """Register HTTP routers (FastAPI ``APIRouter``), mounted after every host route."""
        raise _unsupported("routers")
