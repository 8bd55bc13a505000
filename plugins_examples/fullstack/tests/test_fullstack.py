"""deerflow-fullstack on its own: a registry double records the plugin, the handlers are
called directly with the contexts a host would pass, and the packaged files are checked
against the manifest the host reads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from deerflow_fullstack import MODULE, NAMESPACE, STATIC, Notebook, contribution, install

from deerflow_extension_api import (
    ActionContext,
    BrowserAssets,
    ExtensionPrincipal,
    ExtensionRegistry,
    PluginContribution,
    ToolContext,
)

ALICE = ExtensionPrincipal("alice")
BOB = ExtensionPrincipal("bob")
SETTINGS = {"enabled": True, "max_notes": 2, "heading": "Mine"}


class Recorder(ExtensionRegistry):
    """A registry whose plugin() accepts (``supported``) or, as a 0.2.1 host would, refuses."""

    def __init__(self, supported: bool = True) -> None:
        self.plugins: list[PluginContribution] = []
        self.supported = supported

    def middlewares(self, contributor: Any) -> None: ...
    def task_lifecycle(self, contributor: Any) -> None: ...
    def system_model_observer(self, observer: Any) -> None: ...
    def service(self, service: Any) -> None: ...
    def routers(self, routers: Any) -> None: ...
    def agent_assembly_observer(self, observer: Any) -> None: ...
    def context_compaction_observer(self, observer: Any) -> None: ...

    def plugin(self, contribution: PluginContribution) -> bool:
        if self.supported:
            self.plugins.append(contribution)
        return self.supported


def test_install_registers_one_plugin_with_every_part() -> None:
    registry = Recorder()
    install(registry, {"enabled": True})
    (plugin,) = registry.plugins
    assert (plugin.namespace, plugin.enabled) == (NAMESPACE, True)
    assert [a.name for a in plugin.backend] == ["list", "add", "clear", "ask"]
    assert [t.name for t in plugin.tools] == ["remember"]
    assert isinstance(plugin.frontend, BrowserAssets) and plugin.frontend.module == MODULE
    assert [f.key for f in plugin.settings_contribution().fields] == ["enabled", "max_notes", "heading"]
    assert install.__deerflow_api__ == "0.2.6"


def test_a_host_without_plugins_and_a_bad_switch_are_refused() -> None:
    with pytest.raises(RuntimeError, match="full-stack plugins"):
        install(Recorder(supported=False), {})
    with pytest.raises(ValueError, match=r"config\.enabled"):
        install(Recorder(), {"enabled": "yes"})


def test_notes_belong_to_their_user_and_keep_the_newest() -> None:
    notebook = Notebook()

    async def scenario() -> tuple[Any, Any, Any]:
        for text in ("one", "two", "three"):
            await notebook.add_action({"text": text}, ActionContext(ALICE, SETTINGS))
        await notebook.remember_tool({"text": "from the agent"}, ToolContext(BOB, SETTINGS, "t-1"))
        alice = await notebook.list_action({}, ActionContext(ALICE, SETTINGS))
        bob = await notebook.list_action({}, ActionContext(BOB, SETTINGS))
        cleared = await notebook.clear_action({}, ActionContext(ALICE, SETTINGS))
        return alice, bob, cleared

    alice, bob, cleared = asyncio.run(scenario())
    assert [n["text"] for n in alice["notes"]] == ["three", "two"]
    assert alice["heading"] == "Mine"
    assert bob["notes"] == [{"text": "from the agent", "source": "agent", "thread_id": "t-1"}]
    assert cleared == {"cleared": 2}


@pytest.mark.parametrize("payload", [{}, {"text": "  "}, {"text": 3}, {"text": "x" * 2001}])
def test_a_bad_note_is_a_value_error(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="text must be"):
        asyncio.run(Notebook().add_action(payload, ActionContext(ALICE, SETTINGS)))


def test_the_manifest_lists_the_packaged_module() -> None:
    manifest = json.loads((STATIC / "ui_manifest.json").read_text(encoding="utf-8"))
    assert manifest["schema_version"] == 1 and manifest["entry"] in manifest["files"]
    for path in manifest["files"]:
        assert (STATIC / path).is_file(), path
    assert contribution(Notebook()).frontend == BrowserAssets(MODULE, STATIC, public_fields=("heading",))
