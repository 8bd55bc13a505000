"""A full-stack plugin in DeerFlow's shape: notes the agent and the user keep together.

One ``registry.plugin(PluginContribution(...))`` gives:

- the agent a **model tool**, ``remember``, that saves a note for the user it runs for;
- the browser **backend actions** ``list``, ``add`` and ``clear`` at
  ``POST /api/plugins/example.notes/actions/<name>``;
- a **page** (``/workspace/extensions/example.notes/notes``) and a **conversation action**
  ("Save last answer"), in one plain ES module shipped in ``static/`` with its
  ``ui_manifest.json`` (packaged assets, no build step);
- a **setting**, ``max_notes``, that bounds each user's notes, and a public ``heading`` the
  page shows.

It imports ``deerflow_extension_api`` and the standard library only, so any host of the
contract's 0.2 line from 0.2.6 on runs it unchanged::

    plugins:
      - package: deerflow-fullstack
        use: deerflow_fullstack:install      # or the entry-point name: fullstack
        settings: {example.notes: {enabled: true, max_notes: 20}}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deerflow_extension_api import (
    BackendAction,
    BrowserAssets,
    ExtensionInstall,
    ExtensionRegistry,
    ModelTool,
    PluginContribution,
    SettingsField,
    extension,
)

from .notes import NAMESPACE, REMEMBER_SCHEMA, Notebook

__all__ = ["MODULE", "NAMESPACE", "Notebook", "contribution", "install"]

MODULE = "example-notes.v1"
STATIC = Path(__file__).resolve().parent / "static"

FIELDS = (
    SettingsField("max_notes", "Notes per user", "integer", 20, "Oldest notes are dropped past this.", 1, 200),
    SettingsField("heading", "Page heading", "string", "Notes", "Shown at the top of the page.", max_length=80),
)


def contribution(notebook: Notebook, *, enabled: bool = False) -> PluginContribution:
    """The whole plugin, bound to one ``notebook`` (the install's own store)."""
    return PluginContribution(
        namespace=NAMESPACE,
        title="Notes",
        description="Notes the agent and the user keep together.",
        enabled=enabled,
        fields=FIELDS,
        frontend=BrowserAssets(MODULE, STATIC, public_fields=("heading",)),
        backend=(
            BackendAction("list", notebook.list_action),
            BackendAction("add", notebook.add_action),
            BackendAction("clear", notebook.clear_action),
            BackendAction("ask", notebook.ask_action),
        ),
        tools=(
            ModelTool(
                "remember",
                "Save a short note for the user, to read later on the Notes page.",
                REMEMBER_SCHEMA,
                notebook.remember_tool,
            ),
        ),
    )


@extension(api="0.2.6", name="fullstack")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register the plugin; ``config.enabled`` (a boolean) is its default switch."""
    enabled = config.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ValueError("fullstack: config.enabled must be true or false")
    if not registry.plugin(contribution(Notebook(), enabled=enabled)):
        raise RuntimeError("fullstack needs a host with full-stack plugins (deerflow-extension-api 0.2.6)")


_typed: ExtensionInstall = install  # install() has the contract's shape
