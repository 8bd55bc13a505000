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
    from .plugins import PluginContribution
    from .services import ExtensionService
    from .system import SystemModelCallObserver

__all__ = ["ExtensionRegistry"]

# The registration methods of the contract's first release (DeerFlow's 0.1): every registry
# has them. Later releases add methods (0.2: agent_assembly_observer,
# context_compaction_observer; 0.2.2: plugin) that a registry written earlier lacks.
_FIRST_RELEASE = ("middlewares", "task_lifecycle", "system_model_observer", "service", "routers")


@runtime_checkable
class ExtensionRegistry(Protocol):
    """Where ``install(registry, config)`` registers contributions.

    Every method has a default body that returns ``None`` (``plugin`` returns ``False``:
    "this host does not take plugins", which an extension may test), like every other protocol of
    the contract and as DeerFlow's contract has it: adding a registration method in a
    later release stays additive for code that subclasses this protocol (a test double,
    say). The host does not inherit these defaults: its registry implements every
    method, and refuses one it does not know with an ``AttributeError`` that fails the
    install, so a contribution is never silently ignored.

    Runtime checks are additive too. ``isinstance(obj, ExtensionRegistry)`` asks for the
    methods of the contract's first release, not for every method of this one: a
    registry double written for DeerFlow's 0.1 contract (its example's tests keep one)
    must not stop being a registry because 0.2 added methods it never calls. Structural
    *type* checking (mypy) still sees every method.
    """

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        if cls is ExtensionRegistry and all(callable(getattr(other, name, None)) for name in _FIRST_RELEASE):
            return True
        undecided: bool = NotImplemented  # the usual checks decide (nominal subclasses, registration)
        return undecided

    def plugin(self, contribution: PluginContribution) -> bool:
        """Register a full-stack plugin (tools, actions, browser parts, settings).

        A host that runs plugins returns ``True`` once it accepted the contribution and
        raises ``ValueError`` for one it refuses; this default, a host without plugin
        support, returns ``False``.
        """
        return False

    def middlewares(self, contributor: MiddlewareContributor) -> None:
        return None

    def task_lifecycle(self, contributor: TaskLifecycleContributor) -> None:
        return None

    def system_model_observer(self, observer: SystemModelCallObserver) -> None:
        return None

    def agent_assembly_observer(self, observer: AgentAssemblyObserver) -> None:
        return None

    def context_compaction_observer(self, observer: ContextCompactionObserver) -> None:
        return None

    def service(self, service: ExtensionService) -> None:
        return None

    def routers(self, routers: Sequence[Any]) -> None:
        """Register HTTP routers (FastAPI ``APIRouter``), mounted after every host route."""
        return None
