"""The host's ``ExtensionRegistry``: pluggy underneath, attribution and rollback on top.

Each registration wraps the contributor in a small plugin object whose hookimpls forward to
the contributor's own bound methods. Plugin names encode the entry's *position* in
``plugins:`` and the registration index — ``"{position}:{use}#{n}"`` — so two entries with
the same ``use`` never share a name and rollback is positional: it unregisters exactly the
plugin objects registered since the failing install began.

What a contributor must look like is DeerFlow's rule, not pluggy's: each hook it implements
must accept the contract's arguments *positionally*, which is how the host calls it
(``_notify_each`` and friends). That is checked by binding the call with ``inspect`` at
registration, so ``on_task_stop(self, app_store, task_store, info, outcome=None)`` or
``on_task_start(self, app, store, task)`` are accepted (parameter names and extra defaulted
parameters are the author's business) while a hook that needs a fifth argument, or takes
only two, is refused once, at install time, and rolls back. pluggy would check *names*
(it calls by keyword), so the forwarders it sees take ``*args`` and the binding check
stands in for its validation.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from deerflow_extension_api import ExtensionData, ExtensionRuntimeDeps

from ..boundary.diagnostics import DiagnosticsList
from ..full_stack.registration import RegisteredPlugin, check_plugin
from .hookspecs import KINDS, PROJECT_NAME, SPEC_ARGNAMES, ContributionKind, ContributionSpecs, hookimpl
from .snapshot import Contribution, LoadedExtensions, TablePrefix

__all__ = ["GrantedService", "HostRegistry", "PluginSettingsError", "RegistrationError", "RegistrationMark"]

logger = logging.getLogger("deerflow_ext.extensions")


class RegistrationError(TypeError):
    """A contribution the host cannot accept; raised inside ``install()``, so it rolls back."""


class PluginSettingsError(ValueError):
    """The operator's ``settings:`` on a record name a plugin its ``install()`` never registered."""


@dataclass(frozen=True)
class RegistrationMark:
    """Where one entry's install started; :meth:`HostRegistry.rollback` returns to it."""

    position: int
    label: str
    extension: str
    start: int
    intercept: bool = False
    plugins_start: int = 0
    settings: Mapping[str, Mapping[str, Any]] | None = None
    model_invoker: Any = None


class GrantedService:
    """A service of a record granted model invocation: its ``deps`` carry the invoker.

    The invoker is opened for the service's start and closed (calls in flight cancelled,
    later ones refused) when the service stops or its start fails.
    """

    def __init__(self, inner: Any, invoker: Any) -> None:
        self.inner = inner
        self.invoker = invoker

    def __repr__(self) -> str:
        return f"GrantedService({self.inner!r})"

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        self.invoker.open()
        try:
            await self.inner.start(dataclasses.replace(deps, model_invoker=self.invoker))
        except BaseException:
            self.invoker.close()
            raise

    async def stop(self) -> None:
        self.invoker.close()
        stop = getattr(self.inner, "stop", None)
        if callable(stop):
            await stop()


class _ContributionPlugin:
    """The plugin object pluggy sees for one contribution; hookimpls are set per instance."""

    def __init__(self, contribution: Contribution[Any], kind: ContributionKind, sequence: int) -> None:
        self.contribution = contribution
        self.kind = kind
        self.sequence = sequence

    def __repr__(self) -> str:
        return f"<{self.kind.registry_method} {self.contribution.plugin_name}>"

    def __dir__(self) -> list[str]:
        # Speed: pluggy's register() finds hookimpls by scanning dir(plugin); listing only
        # the hook names set on this instance skips ~30 inherited dunders per registration.
        return [hook for hook, _ in self.kind.hooks if hook in self.__dict__]


def _forwarder(target: Callable[..., Any]) -> Callable[..., Any]:
    # No functools.wraps: pluggy would read the target's parameter names through
    # ``__wrapped__`` and refuse names the contract does not use (see the module docstring).
    def forward(*args: Any) -> Any:
        return target(*args)

    forward.__name__ = getattr(target, "__name__", "forward")
    return hookimpl(forward)


def _binding_problem(target: Callable[..., Any], argnames: Sequence[str]) -> str | None:
    """Why ``target`` cannot be called with the contract's arguments, positionally; else None."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # no introspectable signature (a builtin): let it be called
        return None
    try:
        signature.bind(*argnames)
    except TypeError as exc:
        return str(exc)
    return None


def _constant(value: object) -> Callable[[], object]:
    def router() -> object:
        return value

    return hookimpl(router)


class HostRegistry:
    """Collects registrations during loading; :meth:`freeze` turns them into a snapshot.

    Only the methods of ``deerflow_extension_api.ExtensionRegistry`` exist: a registration
    method this host does not implement raises ``AttributeError`` in ``install()`` (and so
    rolls back) instead of being silently ignored.
    """

    def __init__(self, *, config_file: str = "config.yaml") -> None:
        self._config_file = config_file
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(ContributionSpecs)
        if os.environ.get("DEERFLOW_TRACE_EXTENSIONS") == "1":
            self._pm.trace.root.setwriter(logger.info)
            self._pm.enable_tracing()
        self._plugins: list[_ContributionPlugin] = []
        # Full-stack plugins are not pluggy hooks (the host calls them by namespace), so they
        # are kept beside pluggy's registrations, with their own start in each mark.
        self._full_stack: list[Contribution[RegisteredPlugin]] = []
        self._mark: RegistrationMark | None = None
        self._per_entry = 0
        self._sequence = 0

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        return self._pm

    # -- install bracketing -------------------------------------------------------------
    def begin(
        self,
        position: int,
        label: str,
        extension: str,
        *,
        intercept: bool = False,
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        model_invoker: Any = None,
    ) -> RegistrationMark:
        """Start attributing registrations to one ``plugins:`` entry.

        ``settings`` is the record's ``settings:`` map (plugin namespace -> field -> value),
        applied by :meth:`plugin` and checked by :meth:`check_settings_claimed`.
        ``model_invoker`` is the record's granted invoker (``host_access.model_invocation``):
        its services get it on ``deps.model_invoker``.
        """
        self._mark = RegistrationMark(
            position, label, extension, len(self._plugins), intercept, len(self._full_stack), settings, model_invoker
        )
        self._per_entry = 0
        return self._mark

    def end(self) -> None:
        self._mark = None

    def rollback(self, mark: RegistrationMark) -> None:
        """Unregister everything registered since ``mark`` — and nothing before it."""
        for plugin in self._plugins[mark.start :]:
            self._pm.unregister(plugin)
        del self._plugins[mark.start :]
        del self._full_stack[mark.plugins_start :]
        self._mark = None

    def check_settings_claimed(self, mark: RegistrationMark) -> None:
        """Refuse a record whose ``settings:`` name a namespace its install did not register.

        A misspelt namespace would otherwise leave the operator's values silently unused.
        """
        if not mark.settings:
            return
        registered = {c.contributor.namespace for c in self._full_stack[mark.plugins_start :]}
        for namespace in mark.settings:
            if namespace not in registered:
                known = ", ".join(sorted(registered)) or "none"
                raise PluginSettingsError(
                    f"{self._config_file}: plugins[{mark.label}].settings[{namespace!r}]: this extension registered "
                    f"no plugin of that namespace (it registered: {known})"
                )

    # -- the ExtensionRegistry protocol ---------------------------------------------------
    def plugin(self, contribution: Any) -> bool:
        """Accept a full-stack plugin after every check of ``full_stack.registration``.

        ``ValueError`` (first rule broken) leaves nothing recorded; ``True`` otherwise.
        """
        mark = self._mark
        if mark is None:
            raise RegistrationError("extensions may register only while their install() runs")
        namespace = getattr(contribution, "namespace", None)
        overrides = (mark.settings or {}).get(namespace) if isinstance(namespace, str) else None
        accepted = check_plugin(
            contribution,
            (c.contributor for c in self._full_stack),
            overrides=overrides,
            where=f"{self._config_file}: plugins[{mark.label}].settings[{namespace!r}]",
        )
        self._per_entry += 1
        plugin_name = f"{mark.position}:{mark.extension}#{self._per_entry}"
        self._full_stack.append(
            Contribution(mark.extension, mark.label, mark.position, plugin_name, accepted, intercept=mark.intercept)
        )
        return True

    def middlewares(self, contributor: Any) -> None:
        self._register(KINDS["middlewares"], contributor)

    def task_lifecycle(self, contributor: Any) -> None:
        self._register(KINDS["task_lifecycle"], contributor)

    def system_model_observer(self, observer: Any) -> None:
        self._register(KINDS["system_model_observer"], observer)

    def agent_assembly_observer(self, observer: Any) -> None:
        self._register(KINDS["agent_assembly_observer"], observer)

    def context_compaction_observer(self, observer: Any) -> None:
        self._register(KINDS["context_compaction_observer"], observer)

    def service(self, service: Any) -> None:
        invoker = self._mark.model_invoker if self._mark is not None else None
        if invoker is not None and callable(getattr(service, "start", None)):
            service = GrantedService(service, invoker)
        self._register(KINDS["service"], service)

    def routers(self, routers: Sequence[Any]) -> None:
        if isinstance(routers, (str, bytes)) or not isinstance(routers, Sequence):
            raise RegistrationError(f"routers() takes a sequence of routers, got {type(routers).__name__}")
        for router in routers:
            if not hasattr(router, "routes"):
                raise RegistrationError(f"routers() got {type(router).__name__}, which is not an APIRouter")
        for router in routers:
            self._register(KINDS["routers"], router)

    def __getattr__(self, name: str) -> Any:
        supported = ", ".join(sorted([*KINDS, "plugin"]))
        raise AttributeError(
            f"this host's extension registry has no {name!r} (it supports: {supported}); "
            "the extension needs a newer deerflow-ext"
        )

    # -- internals -------------------------------------------------------------------------
    def _register(self, kind: ContributionKind, contributor: Any) -> None:
        mark = self._mark
        if mark is None:
            raise RegistrationError("extensions may register only while their install() runs")
        if kind.registry_method == "routers":
            methods: dict[str, Callable[..., Any]] = {"router": _constant(contributor)}
        else:
            methods = {}
            for hook, attr in kind.hooks:
                target = getattr(contributor, attr, None)
                if not callable(target):
                    continue
                argnames = SPEC_ARGNAMES[hook]
                problem = _binding_problem(target, argnames)
                if problem is not None:
                    raise RegistrationError(
                        f"{type(contributor).__name__}.{attr} cannot be called with the contract's "
                        f"arguments ({', '.join(argnames)}): {problem}"
                    )
                methods[hook] = _forwarder(target)
            if not methods:
                wanted = " / ".join(attr for _, attr in kind.hooks)
                raise RegistrationError(
                    f"{kind.registry_method}() needs an object with {wanted}; got {type(contributor).__name__}"
                )
        self._per_entry += 1
        plugin_name = f"{mark.position}:{mark.extension}#{self._per_entry}"
        contribution = Contribution(
            mark.extension, mark.label, mark.position, plugin_name, contributor, intercept=mark.intercept
        )
        self._sequence += 1
        plugin = _ContributionPlugin(contribution, kind, self._sequence)
        for hook, method in methods.items():
            setattr(plugin, hook, method)
        try:
            self._pm.register(plugin, name=plugin_name)
        except pluggy.PluginValidationError as exc:
            raise RegistrationError(f"{kind.registry_method}(): {exc}") from exc
        self._plugins.append(plugin)

    def freeze(
        self,
        *,
        table_prefixes: Sequence[TablePrefix] = (),
        loaded: Sequence[str] = (),
        total: int = 0,
        disabled: int = 0,
        app_store: ExtensionData | None = None,
        diagnostics: DiagnosticsList | None = None,
    ) -> LoadedExtensions:
        """Freeze the registrations, read back from pluggy, in registration order.

        ``diagnostics`` is the list loading recorded into; the snapshot keeps it as its own
        (a fresh one when not given).
        """
        fields: dict[str, list[Contribution[Any]]] = {kind.field: [] for kind in KINDS.values()}
        plugins: dict[int, _ContributionPlugin] = {}
        for kind in KINDS.values():
            for hook, _ in kind.hooks:
                for impl in getattr(self._pm.hook, hook).get_hookimpls():
                    plugin = impl.plugin
                    if isinstance(plugin, _ContributionPlugin):
                        plugins[plugin.sequence] = plugin
        for sequence in sorted(plugins):
            plugin = plugins[sequence]
            fields[plugin.kind.field].append(plugin.contribution)
        return LoadedExtensions(
            **{name: tuple(values) for name, values in fields.items()},
            plugins=tuple(self._full_stack),
            table_prefixes=tuple(table_prefixes),
            loaded=tuple(loaded),
            total=total,
            disabled=disabled,
            app_store=app_store if app_store is not None else ExtensionData("app"),
            diagnostics=diagnostics if diagnostics is not None else DiagnosticsList(),
        )
