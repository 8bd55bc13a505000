"""Extensions that register full-stack plugins, for the loading tests (``use: extensions.fixtures_full_stack:...``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import (
    BackendAction,
    BrowserModule,
    ModelTool,
    PluginContribution,
    SettingsField,
    extension,
)

SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


async def answer(payload: Mapping[str, Any], context: Any) -> dict[str, Any]:
    return {"echo": dict(payload), "user": context.principal.user_id}


def make_plugin(namespace: str = "acme.notes", *, module: str | None = None, **overrides: Any) -> PluginContribution:
    values: dict[str, Any] = {
        "namespace": namespace,
        "title": "Notes",
        "fields": (
            SettingsField("limit", "Limit", "integer", 10, minimum=1, maximum=50),
            SettingsField("label", "Label", "string", "notes", max_length=8),
            SettingsField("verbose", "Verbose", "boolean", False),
        ),
        "backend": (BackendAction("list", answer),),
        "tools": (ModelTool("search_notes", "Search the notes.", SCHEMA, answer),),
        "frontend": BrowserModule(module or namespace, "export default {apiVersion: 1}", ("limit",)),
    }
    values.update(overrides)
    return PluginContribution(**values)


@extension(api="0.2.6", name="notes")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    """Registers one plugin per namespace in ``config["namespaces"]`` (default ``acme.notes``)."""
    for namespace in config.get("namespaces", ["acme.notes"]):
        if registry.plugin(make_plugin(namespace, enabled=bool(config.get("enabled", False)))) is not True:
            raise RuntimeError("this host does not take plugins")


@extension(api="0.2.6")
def fails_after_plugin(registry: Any, config: Mapping[str, Any]) -> None:
    registry.plugin(make_plugin(config.get("namespace", "acme.doomed")))
    raise RuntimeError("install failed after its plugin registered")


@extension(api="0.2.6")
def swallows_refusal(registry: Any, config: Mapping[str, Any]) -> None:
    """Registers a plugin the host refuses and carries on: the record's settings then name nothing."""
    try:
        registry.plugin(make_plugin("acme.swallowed", tools=(), backend=(), frontend=None))
    except ValueError:
        pass


class InvokingService:
    """A service that keeps what the host lent it, for the model-invocation tests."""

    def __init__(self) -> None:
        self.deps: Any = None
        self.stopped = False

    async def start(self, deps: Any) -> None:
        self.deps = deps

    async def stop(self) -> None:
        self.stopped = True


SERVICES: list[InvokingService] = []


@extension(api="0.2.6")
def install_service(registry: Any, config: Mapping[str, Any]) -> None:
    service = InvokingService()
    SERVICES.append(service)
    registry.service(service)
