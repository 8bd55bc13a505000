"""Plugin model tools (``ModelTool``) as tools of the agent being built.

Each enabled plugin's tools become LangChain ``StructuredTool``s named as DeerFlow names
them (:func:`plugin_tool_name`), so a prompt or client that names a DeerFlow plugin tool
names the same tool here. The model sees the plugin's JSON schema; LangChain injects the
``runtime`` argument, which the schema may not declare. Every call is held to DeerFlow's
limits, and every failure is a ``ToolException`` the model reads as the tool's answer (the
run goes on): input over 256 KiB or not matching the schema, output over 64 KiB, a handler
that runs past 30 s or raises. A handler's own error text is logged by type only and never
shown to the model, because it may carry what the plugin keeps private.

The host's tools come first: a plugin tool whose name a host tool already has is left out
with a warning; two plugin tools of one name refuse the build (it cannot happen with
DeerFlow's names unless a namespace and a tool name repeat, which registration refuses).
Tools are built once per extension snapshot and reused, so the agent's compiled graph and
its descriptor are reused across runs as before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any

from jsonschema import Draft202012Validator
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from deerflow_extension_api import ExtensionPrincipal, ModelTool, ToolContext

from ..contract.snapshot import Contribution, LoadedExtensions, context_get
from ..full_stack.registration import RegisteredPlugin

__all__ = [
    "CALL_TIMEOUT_SECONDS",
    "MAX_INPUT_BYTES",
    "MAX_OUTPUT_BYTES",
    "PLUGIN_TOOL_METADATA_KEY",
    "RUN_USER_CONTEXT_KEY",
    "TOOL_PRINCIPAL_ID",
    "build_plugin_tools",
    "merge_tools",
    "plugin_tool_name",
    "plugin_tools",
    "tool_source",
]

logger = logging.getLogger("deerflow_ext.extensions")

MAX_INPUT_BYTES = 256 * 1024
MAX_OUTPUT_BYTES = 64 * 1024
CALL_TIMEOUT_SECONDS = 30.0
PLUGIN_TOOL_METADATA_KEY = "deerflow_plugin"
# A tool's principal carries only the user id, as in DeerFlow: the run's owner, read from its
# runtime context; this one when the run has none (an embedded client's run).
TOOL_PRINCIPAL_ID = "default"
RUN_USER_CONTEXT_KEY = "user_id"
"""Where a run's context holds its owner (DeerFlow's host key): the host writes it from the
run's recorded ``user_id`` (the request's principal: the authenticated user with ``auth``,
``default`` without) after dropping a caller's value, so a tool reads the run's owner, never
what a caller merged into the context."""

_DISABLED = "Plugin disabled by administrator."
_INVALID_INPUT = "Invalid plugin tool input."
_TOO_LARGE = "Plugin result exceeds 64 KiB."
_UNAVAILABLE = "Plugin tool unavailable or input rejected."
_UNSAFE = re.compile(r"[^a-z0-9_]")


def plugin_tool_name(namespace: str, name: str) -> str:
    """DeerFlow's derived name: ``ext_<namespace, 20>_<name, 25>_<12 hex of sha256(ns:name)>``."""
    digest = hashlib.sha256(f"{namespace}:{name}".encode()).hexdigest()[:12]
    return f"ext_{_UNSAFE.sub('_', namespace)[:20]}_{name[:25]}_{digest}"


def tool_source(tool: object) -> str:
    """What the assembly descriptor names as a tool's source: ``plugin:<namespace>`` or builtin."""
    metadata = getattr(tool, "metadata", None)
    # BaseTool.metadata is a dict or None: a plain type check, not the Mapping ABC's (this runs
    # for every tool each time an agent is described).
    namespace = metadata.get(PLUGIN_TOOL_METADATA_KEY) if isinstance(metadata, dict) else None
    return f"plugin:{namespace}" if isinstance(namespace, str) else "builtin"


def build_plugin_tools(
    plugins: Iterable[Contribution[RegisteredPlugin]],
    *,
    groups: Iterable[str] | None = None,
    reserved_names: Iterable[str] = (),
) -> list[BaseTool]:
    """The tools of every enabled plugin (of ``groups``, when given), in registration order.

    A name in ``reserved_names`` or repeated among plugin tools is a ``ValueError``.
    """
    wanted = None if groups is None else set(groups)
    taken = set(reserved_names)
    built: list[BaseTool] = []
    for contribution in plugins:
        plugin = contribution.contributor
        if not plugin.contribution.tools or plugin.settings.get("enabled") is not True:
            continue
        for declaration in plugin.contribution.tools:
            if wanted is not None and declaration.group not in wanted:
                continue
            name = plugin_tool_name(plugin.namespace, declaration.name)
            if name in taken:
                raise ValueError(f"Plugin tool name collision: {name}")
            taken.add(name)
            built.append(_tool(plugin, declaration, name, contribution.extension))
    return built


def merge_tools(host: Sequence[BaseTool], plugin: Sequence[BaseTool]) -> list[BaseTool]:
    """Host tools first; a plugin tool named like a host tool is left out, with a warning."""
    names = {tool.name for tool in host}
    merged = list(host)
    for tool in plugin:
        if tool.name in names:
            logger.warning("plugin tool %s is left out: a host tool has that name", tool.name)
            continue
        merged.append(tool)
    return merged


_built: dict[int, tuple[LoadedExtensions, tuple[BaseTool, ...]]] = {}
_built_lock = threading.Lock()
_BUILT_KEPT = 8


def plugin_tools(extensions: LoadedExtensions, groups: Sequence[str] | None = None) -> tuple[BaseTool, ...]:
    """Every enabled plugin tool of ``extensions`` (of ``groups``, when given), built once
    per snapshot and built once in all: a tool of two groups' agents is one object.

    The same tool objects for the same snapshot keep the agent's compiled graph and its
    descriptor reusable (both are keyed by tool identity).
    """
    if not extensions.plugins:
        return ()
    with _built_lock:
        known = _built.get(id(extensions))
        tools = known[1] if known is not None and known[0] is extensions else None
    if tools is None:
        tools = tuple(build_plugin_tools(extensions.plugins))
        with _built_lock:
            if len(_built) >= _BUILT_KEPT:
                _built.pop(next(iter(_built)))
            _built[id(extensions)] = (extensions, tools)
    if groups is None:
        return tools
    return tuple(tool for tool in tools if (tool.metadata or {}).get("group") in groups)


def _tool(plugin: RegisteredPlugin, declaration: ModelTool, name: str, installation: str) -> BaseTool:
    schema = dict(plugin.tool_schemas[declaration.name])
    validator = Draft202012Validator(schema)
    settings = plugin.settings
    namespace = plugin.namespace
    handler = declaration.handler

    async def invoke(runtime: ToolRuntime, **payload: Any) -> str:
        if settings.get("enabled") is not True:
            raise ToolException(_DISABLED)
        try:
            encoded = json.dumps(payload, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            raise ToolException(_INVALID_INPUT) from None
        if len(encoded.encode("utf-8")) > MAX_INPUT_BYTES or not validator.is_valid(payload):
            raise ToolException(_INVALID_INPUT)
        context = ToolContext(
            ExtensionPrincipal(_user_id(runtime)),
            settings,
            _thread_id(runtime),
        )
        try:
            async with asyncio.timeout(CALL_TIMEOUT_SECONDS):
                result = await handler(MappingProxyType(payload), context)
            text = json.dumps(result, ensure_ascii=False, allow_nan=False)
        except Exception as exc:  # the plugin's failure, never the run's
            logger.warning("plugin tool %s.%s failed: %s", namespace, declaration.name, type(exc).__name__)
            raise ToolException(_UNAVAILABLE) from None
        if len(text.encode("utf-8")) > MAX_OUTPUT_BYTES:
            raise ToolException(_TOO_LARGE)
        return text

    def invoke_sync(runtime: ToolRuntime, **payload: Any) -> str:
        # A graph run synchronously calls tools on worker threads without a running loop.
        return asyncio.run(invoke(runtime, **payload))

    return StructuredTool(
        name=name,
        description=declaration.description,
        args_schema=schema,
        func=invoke_sync,
        coroutine=invoke,
        handle_tool_error=True,
        metadata={
            PLUGIN_TOOL_METADATA_KEY: namespace,
            "installation": installation,
            "tool": declaration.name,
            "group": declaration.group,
        },
    )


def _user_id(runtime: object) -> str:
    """The run's principal (the ``user_id`` host key of its context), as DeerFlow's
    ``resolve_runtime_user_id``; a run the host recorded no owner for is the default's."""
    value = context_get(getattr(runtime, "context", None), RUN_USER_CONTEXT_KEY)
    return value if isinstance(value, str) and value else TOOL_PRINCIPAL_ID


def _thread_id(runtime: object) -> str | None:
    value = context_get(getattr(runtime, "context", None), "thread_id")
    return value if isinstance(value, str) else None
