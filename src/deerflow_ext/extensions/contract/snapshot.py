"""The immutable loaded-extension snapshot and how a run binds it.

Each task resolves the snapshot once and uses that same object for its task store, its
notifications and its agent construction, so one run never mixes two extension generations.
Construction is synchronous, so a ContextVar binds it there; delegation happens later, from
inside the graph, so the run also publishes it on the LangGraph runtime context, where the
``task`` tool reads it back. Runtime context is caller-mergeable, which is why the key is
written *after* the caller's values are merged and why reading it back is type-checked.

The process-wide set is what the spec keeps for callers that publish nothing (the embedded
``DeerFlowClient``, a standalone LangGraph Server). The Gateway never reads it: each app
hands its own snapshot to its runs, its agent host and its services, and the snapshot
carries its own diagnostics list, so two apps in one process cannot see each other's
extensions or diagnostics.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from deerflow_extension_api import (
    AgentAssemblyObserver,
    ContextCompactionObserver,
    ExtensionData,
    ExtensionService,
    MiddlewareContributor,
    SystemModelCallObserver,
    TaskLifecycleContributor,
)

from ..boundary.diagnostics import DiagnosticsList
from ..full_stack.registration import RegisteredPlugin

__all__ = [
    "CONTRIBUTION_KINDS",
    "EXTENSION_SNAPSHOT_CONTEXT_KEY",
    "Contribution",
    "LoadedExtensions",
    "TablePrefix",
    "bound_extensions",
    "build_extensions",
    "context_get",
    "get_loaded_extensions",
    "publish_snapshot",
    "resolve_run_extensions",
    "set_loaded_extensions",
]

T = TypeVar("T")

EXTENSION_SNAPSHOT_CONTEXT_KEY = "__deerflow_extension_snapshot__"


@dataclass(frozen=True)
class Contribution(Generic[T]):
    """One registered contributor and the ``plugins:`` entry it is attributed to.

    ``intercept`` is the entry's ``intercept: true``: its middlewares may decide (rewrite,
    short-circuit, replace) and fail closed, instead of observing and failing open.
    """

    extension: str
    label: str
    position: int
    plugin_name: str
    contributor: T
    intercept: bool = False


@dataclass(frozen=True)
class TablePrefix:
    """A table prefix an entry owns; registered even when the entry is disabled or fails."""

    prefix: str
    extension: str
    label: str


#: The ``LoadedExtensions`` fields that hold contributions, in the contract's order.
CONTRIBUTION_KINDS: tuple[str, ...] = (
    "middlewares",
    "task_lifecycle",
    "system_model_observers",
    "assembly_observers",
    "compaction_observers",
    "services",
    "routers",
    "plugins",
)


@dataclass(frozen=True)
class LoadedExtensions:
    """Everything the enabled extensions contributed, frozen at the end of loading."""

    middlewares: tuple[Contribution[MiddlewareContributor], ...] = ()
    task_lifecycle: tuple[Contribution[TaskLifecycleContributor], ...] = ()
    system_model_observers: tuple[Contribution[SystemModelCallObserver], ...] = ()
    assembly_observers: tuple[Contribution[AgentAssemblyObserver], ...] = ()
    compaction_observers: tuple[Contribution[ContextCompactionObserver], ...] = ()
    services: tuple[Contribution[ExtensionService], ...] = ()
    routers: tuple[Contribution[Any], ...] = ()
    # Full-stack plugins (``registry.plugin``), as accepted: settings resolved, assets snapshotted.
    plugins: tuple[Contribution[RegisteredPlugin], ...] = ()
    table_prefixes: tuple[TablePrefix, ...] = ()
    loaded: tuple[str, ...] = ()
    total: int = 0
    #: Entries of ``total`` switched off (``enabled: false``); the rest of ``total`` that is not
    #: ``loaded`` failed to load.
    disabled: int = 0
    app_store: ExtensionData = field(default_factory=lambda: ExtensionData("app"), compare=False, repr=False)
    # The live list the problems of these extensions are recorded in (app.state's), from
    # loading on: middleware isolation, services and routers record there, not in a global.
    diagnostics: DiagnosticsList = field(default_factory=DiagnosticsList, compare=False, repr=False)
    needs_task_store: bool = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # Computed once: it is asked on every run, and only these four kinds live in a task.
        object.__setattr__(
            self,
            "needs_task_store",
            bool(self.middlewares or self.task_lifecycle or self.system_model_observers or self.compaction_observers),
        )

    def new_task_store(self, scope_id: str) -> ExtensionData | None:
        """A fresh task store, or ``None`` when no task-scoped contributor is registered."""
        return ExtensionData(scope_id) if self.needs_task_store else None

    @property
    def counts(self) -> str:
        """``1 loaded, 4 disabled`` (and ``, N failed``): what became of every entry, in words."""
        failed = self.total - len(self.loaded) - self.disabled
        parts = [f"{len(self.loaded)} loaded"]
        parts += [f"{self.disabled} disabled"] if self.disabled else []
        parts += [f"{failed} failed"] if failed > 0 else []
        return ", ".join(parts)

    @property
    def summary(self) -> str:
        """The spec's summary line, e.g. ``Extensions loaded: 2/3 (a:install, b:install); 2 loaded, 1 failed``.

        With nothing loaded the list reads ``(none)``, DeerFlow's text (``Extensions loaded:
        0/0 (none)``, ``0/2 (none)``), rather than an empty pair of parentheses. When not every
        entry loaded, :attr:`counts` follows, so ``1/5`` with four entries switched off does not
        read as four failures.
        """
        line = f"Extensions loaded: {len(self.loaded)}/{self.total} ({', '.join(self.loaded) or 'none'})"
        return line if len(self.loaded) == self.total else f"{line}; {self.counts}"

    @classmethod
    def empty(cls) -> LoadedExtensions:
        return cls()


_process_wide: LoadedExtensions = LoadedExtensions()
_process_lock = threading.Lock()
_building: ContextVar[LoadedExtensions | None] = ContextVar("deerflow_building_extensions", default=None)


def get_loaded_extensions() -> LoadedExtensions:
    """The process-wide set: what callers without a published snapshot fall back to."""
    return _process_wide


def set_loaded_extensions(extensions: LoadedExtensions) -> None:
    global _process_wide
    if not isinstance(extensions, LoadedExtensions):
        raise TypeError(f"expected LoadedExtensions, got {type(extensions).__name__}")
    with _process_lock:
        _process_wide = extensions


@contextmanager
def bound_extensions(extensions: LoadedExtensions) -> Iterator[LoadedExtensions]:
    """Bind ``extensions`` for one synchronous agent construction."""
    token = _building.set(extensions)
    try:
        yield extensions
    finally:
        _building.reset(token)


def build_extensions() -> LoadedExtensions:
    """The snapshot bound for the construction under way, else the process-wide set."""
    bound = _building.get()
    return bound if bound is not None else _process_wide


def publish_snapshot(
    context: MutableMapping[str, Any], extensions: LoadedExtensions | None
) -> MutableMapping[str, Any]:
    """Make ``extensions`` the run's snapshot on an already-merged runtime context.

    Popping the key when the run has none matters as much as writing it: otherwise a value a
    caller merged in would survive and be read back as if the host had put it there.
    """
    if extensions is None:
        context.pop(EXTENSION_SNAPSHOT_CONTEXT_KEY, None)
    else:
        context[EXTENSION_SNAPSHOT_CONTEXT_KEY] = extensions
    return context


def resolve_run_extensions(context: Mapping[str, Any] | object | None) -> LoadedExtensions:
    """The snapshot a run published on its runtime context, else the process-wide set."""
    value = context_get(context, EXTENSION_SNAPSHOT_CONTEXT_KEY)
    return value if isinstance(value, LoadedExtensions) else _process_wide


def context_get(context: object, key: str, default: Any = None) -> Any:
    """``context[key]`` for a mapping context, its attribute ``key`` otherwise; ``default``
    when absent or when there is no context. The one rule for reading a runtime context
    (LangGraph hands over whatever shape the caller invoked the graph with)."""
    if context is None:
        return default
    if isinstance(context, Mapping):
        return context.get(key, default)
    return getattr(context, key, default)
