"""Full-stack plugins: one installed package giving the agent tools, users actions, and
operators a page.

``registry.plugin(PluginContribution(...))`` registers one namespace with any of: model
tools the agent calls, backend actions a browser invokes over HTTP, a browser module (or
packaged browser assets) the UI mounts, and settings. Backend code runs inside the Gateway
process with the host's privileges: the host supplies the current settings and an
authenticated principal for every admitted call, but this is not a sandbox. What the host
checks at registration, and the limits it applies per call, are in docs/SPEC.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .agent_runs import AgentRuns
from .auth import ExtensionPrincipal
from .batch_results import BatchResultReader
from .settings import FrontendBinding, SettingsApply, SettingsContribution, SettingsField, SettingValue

__all__ = [
    "ActionContext",
    "BackendAction",
    "BrowserAssets",
    "BrowserModule",
    "ModelTool",
    "PluginContribution",
    "ToolContext",
]


@dataclass(frozen=True, slots=True)
class ActionContext:
    """What a backend action is called with besides its JSON input.

    ``settings`` is a read-only mapping of the plugin's effective settings. The two later
    additions are keyword-only so ``ActionContext(principal, settings)`` (and
    ``ToolContext(principal, settings, thread_id)``) keep working positionally.
    ``batch_results`` is a callable, not a reader: binding one needs permissions an
    unrelated action should not have to hold.
    """

    principal: ExtensionPrincipal
    settings: Mapping[str, SettingValue]
    agent_runs: AgentRuns | None = field(default=None, kw_only=True)
    batch_results: Callable[[], BatchResultReader] | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class BackendAction:
    """``POST /api/plugins/{namespace}/actions/{name}``: JSON object in, JSON out."""

    name: str
    handler: Callable[[Mapping[str, Any], ActionContext], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ToolContext(ActionContext):
    """An action context for a model tool call, plus the thread the agent runs in.

    Ownership of whatever the tool touches is the plugin's to check, keyed on
    ``principal.user_id``.
    """

    thread_id: str | None


@dataclass(frozen=True, slots=True)
class ModelTool:
    """A tool the agent may call. ``input_schema`` is a JSON Schema object (no ``$ref``);
    ``group`` says which agents get it (the lead and subagents ask for groups)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]]
    group: str = "extensions"


@dataclass(frozen=True, slots=True)
class BrowserModule:
    """An inline, self-contained ES module; use :class:`BrowserAssets` when it loads files
    of its own. ``public_fields`` are the settings the browser may see."""

    module: str
    code: str
    public_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "public_fields", tuple(self.public_fields))


@dataclass(frozen=True, slots=True)
class BrowserAssets:
    """Static browser files shipped inside the installed package, listed by a manifest.

    The host validates the manifest and copies the listed files into memory when the
    plugin registers; paths resolve against ``root``, never against a request, and later
    edits to the files are not served until the plugin registers again.
    """

    module: str
    root: str | Path
    manifest: str = "ui_manifest.json"
    public_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "public_fields", tuple(self.public_fields))


@dataclass(frozen=True, slots=True)
class PluginContribution:
    """One namespace: one identity, one ``enabled`` switch, optional settings and parts.

    The host owns the boolean ``enabled`` setting (``enabled`` here is its default); the
    other ``fields`` are non-secret settings, private to the backend unless the browser
    declaration lists them. At least one browser module, backend action or model tool is
    required.
    """

    namespace: str
    title: str
    description: str = ""
    enabled: bool = False
    fields: tuple[SettingsField, ...] = ()
    frontend: BrowserModule | BrowserAssets | None = None
    backend: tuple[BackendAction, ...] = ()
    api_version: int = 1
    tools: tuple[ModelTool, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "backend", tuple(self.backend))
        object.__setattr__(self, "tools", tuple(self.tools))

    def settings_contribution(self) -> SettingsContribution:
        """The settings declaration the host validates: ``enabled`` first, then ``fields``.

        ``applies`` follows from the parts: server-side parts read settings on the next
        request, a browser module on the next page load, both when the plugin has both.
        """
        server_side = bool(self.backend or self.tools)
        applies: SettingsApply
        if server_side and self.frontend:
            applies = "request-and-page-load"
        elif server_side:
            applies = "next-request"
        else:
            applies = "page-load"
        binding = (
            FrontendBinding(self.frontend.module, ("enabled", *self.frontend.public_fields)) if self.frontend else None
        )
        return SettingsContribution(
            namespace=self.namespace,
            title=self.title,
            description=self.description,
            fields=(SettingsField("enabled", "Enabled", "boolean", self.enabled), *self.fields),
            applies=applies,
            frontend=binding,
        )
