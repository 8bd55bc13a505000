"""The checks one ``PluginContribution`` passes before the registry records it.

DeerFlow's order (digest §4.1), each failure a ``ValueError`` and nothing recorded until
every check passed:

1. a ``PluginContribution`` of ``api_version`` 1;
2. at least one browser module, backend action or model tool;
3. model tools: unique names ``[a-z][a-z0-9_]{0,63}``, a description, an async handler;
   then each input schema (:mod:`.schema`);
4. backend actions: unique names ``[a-z][a-z0-9_-]{0,63}``, an async handler;
5. the browser part: packaged assets are snapshotted (:mod:`.browser_assets`), inline
   code must be non-empty and at most 512 KiB of UTF-8;
6. the settings declaration (:mod:`.settings`), then — this host's addition — the
   operator's values for this namespace from ``config.yaml``;
7. the namespace and the browser module id unused by every plugin registered so far.

The result, :class:`RegisteredPlugin`, is what the host keeps: the contribution, its
effective read-only settings, and the browser part as served (a snapshot for assets).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from deerflow_extension_api import BrowserAssets, BrowserModule, PluginContribution
from deerflow_extension_api.settings import SettingsContribution, SettingValue

from .browser_assets import LoadedBrowserAssets, load_browser_assets
from .schema import validate_schema
from .settings import effective_settings, validate_contribution

__all__ = [
    "ACTION_NAME",
    "MAX_INLINE_CODE_BYTES",
    "TOOL_NAME",
    "RegisteredPlugin",
    "check_plugin",
]

TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
ACTION_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
MAX_INLINE_CODE_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class RegisteredPlugin:
    """A plugin as accepted: what it declared, its settings, its browser part as served.

    ``tool_schemas`` holds each tool's checked, detached input schema by tool name.
    """

    contribution: PluginContribution
    declaration: SettingsContribution
    settings: Mapping[str, SettingValue]
    frontend: BrowserModule | LoadedBrowserAssets | None
    tool_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def namespace(self) -> str:
        return self.contribution.namespace


def check_plugin(
    contribution: object,
    registered: Iterable[RegisteredPlugin],
    *,
    overrides: Mapping[str, object] | None = None,
    where: str = "config.yaml",
) -> RegisteredPlugin:
    """Run checks 1 to 7 on ``contribution`` against the plugins ``registered`` so far.

    ``overrides`` are the operator's values for this namespace; ``where`` names their
    place in the configuration for error messages.
    """
    if not isinstance(contribution, PluginContribution) or contribution.api_version != 1:  # 1
        raise ValueError("Unsupported plugin contract")
    if contribution.frontend is None and not contribution.backend and not contribution.tools:  # 2
        raise ValueError("A plugin must contribute a browser module, backend action or tool")
    schemas = _check_tools(contribution)  # 3
    _check_actions(contribution)  # 4
    frontend = _check_frontend(contribution.frontend)  # 5
    declaration = contribution.settings_contribution()  # 6
    validate_contribution(declaration)
    settings = effective_settings(declaration, overrides or {}, where=where)
    others = tuple(registered)
    for other in others:  # 7
        if other.namespace == contribution.namespace:
            raise ValueError(f"Duplicate plugin namespace: {contribution.namespace}")
    if frontend is not None:
        for other in others:
            if other.frontend is not None and other.frontend.module == frontend.module:
                raise ValueError(f"Duplicate browser module: {frontend.module}")
    return RegisteredPlugin(contribution, declaration, settings, frontend, MappingProxyType(schemas))


def _check_tools(contribution: PluginContribution) -> dict[str, Mapping[str, Any]]:
    names: set[str] = set()
    for tool in contribution.tools:
        name = getattr(tool, "name", None)
        if (
            not isinstance(name, str)
            or TOOL_NAME.fullmatch(name) is None
            or name in names
            or not isinstance(getattr(tool, "description", None), str)
            or not tool.description
            or not inspect.iscoroutinefunction(getattr(tool, "handler", None))
        ):
            raise ValueError("Model tools require unique names, descriptions and async handlers")
        names.add(name)
    return {tool.name: MappingProxyType(validate_schema(tool.input_schema, tool=True)) for tool in contribution.tools}


def _check_actions(contribution: PluginContribution) -> None:
    names: set[str] = set()
    for action in contribution.backend:
        name = getattr(action, "name", None)
        if (
            not isinstance(name, str)
            or ACTION_NAME.fullmatch(name) is None
            or name in names
            or not inspect.iscoroutinefunction(getattr(action, "handler", None))
        ):
            raise ValueError("Backend actions require unique names and async handlers")
        names.add(name)


def _check_frontend(frontend: object) -> BrowserModule | LoadedBrowserAssets | None:
    if frontend is None:
        return None
    if isinstance(frontend, BrowserAssets):
        return load_browser_assets(frontend)
    if isinstance(frontend, BrowserModule):
        code = frontend.code
        try:
            size = len(code.encode("utf-8")) if isinstance(code, str) else 0
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 to serve
            size = 0
        if not size or size > MAX_INLINE_CODE_BYTES:
            raise ValueError("Browser code must be nonempty and at most 512 KiB")
        return frontend
    raise ValueError("Unsupported browser transport")
