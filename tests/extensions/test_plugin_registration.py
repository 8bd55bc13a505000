"""registry.plugin(): DeerFlow's checks in its order, each limit at and past its edge.

Every refusal must leave the registry as it was (nothing is written until all checks pass),
so the refusal tests read the frozen snapshot back after the error.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from deerflow_ext.config.schema import AppConfig, PluginEntry
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.contract.registry import HostRegistry, RegistrationError
from deerflow_ext.extensions.full_stack.settings import SettingsError, validate_value
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError, load_extensions
from deerflow_extension_api import (
    BackendAction,
    BrowserAssets,
    BrowserModule,
    ModelTool,
    PluginContribution,
    SettingsField,
)
from extensions.fixtures_full_stack import SCHEMA, answer, make_plugin

F = "extensions.fixtures_full_stack"
KIB = 1024


def sync_handler(payload: Any, context: Any) -> None:
    return None


def registry_in_install(settings: dict[str, dict[str, Any]] | None = None) -> HostRegistry:
    registry = HostRegistry()
    registry.begin(0, "notes", f"{F}:install", settings=settings)
    return registry


def namespaces(registry: HostRegistry) -> list[str]:
    return [c.contributor.namespace for c in registry.freeze().plugins]


def refused(plugin: object, match: str, registry: HostRegistry | None = None) -> None:
    registry = registry if registry is not None else registry_in_install()
    before = namespaces(registry)
    with pytest.raises(ValueError, match=match):
        registry.plugin(plugin)
    assert namespaces(registry) == before, "a refused plugin left something behind"


def accepted(plugin: PluginContribution, registry: HostRegistry | None = None) -> HostRegistry:
    registry = registry if registry is not None else registry_in_install()
    assert registry.plugin(plugin) is True
    assert plugin.namespace in namespaces(registry)
    return registry


def tool(name: str = "search", **overrides: Any) -> ModelTool:
    return dataclasses.replace(ModelTool(name, "Search.", SCHEMA, answer), **overrides)


def action(name: str = "list", handler: Any = answer) -> BackendAction:
    return BackendAction(name, handler)


def backend_only(namespace: str = "acme.x", **overrides: Any) -> PluginContribution:
    """No browser part (so no module id to collide) and, unless given, no tools."""
    return make_plugin(namespace, **{"frontend": None, "tools": (), **overrides})


# -- acceptance and attribution --------------------------------------------------------------
def test_an_accepted_plugin_is_recorded_with_its_source_and_effective_settings() -> None:
    registry = registry_in_install()
    assert registry.plugin(make_plugin()) is True
    registry.end()
    (recorded,) = registry.freeze().plugins
    assert (recorded.extension, recorded.label, recorded.position) == (f"{F}:install", "notes", 0)
    plugin = recorded.contributor
    assert plugin.namespace == "acme.notes"
    assert dict(plugin.settings) == {"enabled": False, "limit": 10, "label": "notes", "verbose": False}
    with pytest.raises(TypeError):
        plugin.settings["enabled"] = True  # type: ignore[index]
    assert plugin.tool_schemas["search_notes"] == SCHEMA
    assert plugin.declaration.applies == "request-and-page-load"


def test_registering_outside_install_is_refused() -> None:
    with pytest.raises(RegistrationError, match="only while their install"):
        HostRegistry().plugin(make_plugin())


# -- 1. the contract ---------------------------------------------------------------------------
@pytest.mark.parametrize("plugin", [object(), {"namespace": "acme.x"}, make_plugin(api_version=2)])
def test_only_a_plugin_contribution_of_api_version_1(plugin: object) -> None:
    refused(plugin, "Unsupported plugin contract")


# -- 2. at least one part ----------------------------------------------------------------------
def test_a_plugin_must_contribute_something() -> None:
    refused(
        make_plugin(frontend=None, tools=(), backend=()), "must contribute a browser module, backend action or tool"
    )
    accepted(make_plugin("acme.tool", frontend=None, backend=()))
    accepted(make_plugin("acme.action", frontend=None, tools=()))
    accepted(make_plugin("acme.page", tools=(), backend=()))


# -- 3. model tools ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "search_2", "a" + "b" * 63])
def test_tool_names_accepted(name: str) -> None:
    accepted(backend_only(tools=(tool(name),)))


@pytest.mark.parametrize("name", ["", "a" + "b" * 64, "Search", "2search", "search-notes", "search notes", "_s"])
def test_tool_names_refused(name: str) -> None:
    refused(backend_only(tools=(tool(name),)), "Model tools require unique names, descriptions and async handlers")


@pytest.mark.parametrize(
    "tools",
    [
        (tool("a"), tool("a")),
        (tool(description=""),),
        (tool(handler=sync_handler),),
        (tool(handler=None),),
    ],
    ids=["duplicate", "no description", "sync handler", "no handler"],
)
def test_tools_need_unique_names_descriptions_and_async_handlers(tools: tuple[ModelTool, ...]) -> None:
    refused(backend_only(tools=tools), "Model tools require unique names, descriptions and async handlers")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"properties": {}},
        {"type": "object", "properties": {"a": {"$ref": "#/defs/a"}}},
        {"type": "object", "properties": {"a": {"items": [{"$dynamicRef": "#x"}]}}},
        {"type": "object", "$recursiveRef": "#"},
        {"type": "object", "properties": {"runtime": {"type": "string"}}},
        {"type": "object", "properties": {"config": {"type": "object"}}},
        {"type": "object", "properties": {"a": {"type": "nonsense"}}},
        {"type": "object", "required": "query"},
        {"type": "object", "enum": {1, 2}},
        {"type": "object", "maximum": float("nan")},
        ["type", "object"],
    ],
)
def test_tool_schemas_refused(schema: Any) -> None:
    refused(backend_only(tools=(tool(input_schema=schema),)), "Invalid plugin object schema")


def test_a_tool_schema_is_kept_as_a_detached_copy() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    registry = accepted(backend_only(tools=(tool(input_schema=schema),)))
    schema["properties"]["q"]["type"] = "integer"
    (recorded,) = registry.freeze().plugins
    assert recorded.contributor.tool_schemas["search"]["properties"]["q"]["type"] == "string"


def test_tool_checks_come_before_action_checks() -> None:
    both_bad = backend_only(tools=(tool("Bad"),), backend=(action("Bad"),))
    refused(both_bad, "Model tools require")


# -- 4. backend actions ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "list-all", "list_all", "a" + "b" * 63])
def test_action_names_accepted(name: str) -> None:
    accepted(backend_only(backend=(action(name),)))


@pytest.mark.parametrize("name", ["", "a" + "b" * 64, "List", "-list", "list.all", "list/all"])
def test_action_names_refused(name: str) -> None:
    refused(backend_only(backend=(action(name),)), "Backend actions require unique names and async handlers")


def test_actions_need_unique_names_and_async_handlers() -> None:
    refused(backend_only(backend=(action("a"), action("a"))), "Backend actions require unique names")
    refused(backend_only(backend=(action("a", sync_handler),)), "Backend actions require unique names")


# -- 5. the browser part -----------------------------------------------------------------------------
def page(code: str, module: str = "acme.page") -> PluginContribution:
    return make_plugin("acme.page", frontend=BrowserModule(module, code), tools=(), backend=())


def test_inline_code_at_most_512_kib_of_utf8() -> None:
    accepted(page("x" * (512 * KIB)))
    refused(page("x" * (512 * KIB + 1)), "Browser code must be nonempty and at most 512 KiB")
    refused(page("é" * (256 * KIB) + "x"), "at most 512 KiB")  # 2 bytes a character: counted in bytes
    refused(page(""), "Browser code must be nonempty")
    refused(page("\ud800"), "Browser code must be nonempty")  # a lone surrogate has no UTF-8


def test_an_unknown_browser_transport_is_refused() -> None:
    refused(make_plugin(frontend="https://cdn.example/app.js"), "Unsupported browser transport")  # type: ignore[arg-type]


def test_packaged_assets_are_snapshotted_at_registration(tmp_path: Any) -> None:
    (tmp_path / "index.js").write_text("export default {}", encoding="utf-8")
    (tmp_path / "ui_manifest.json").write_text(
        '{"schema_version": 1, "entry": "index.js", "files": ["index.js"]}', encoding="utf-8"
    )
    registry = accepted(make_plugin("acme.assets", frontend=BrowserAssets("acme.assets", tmp_path)))
    (recorded,) = registry.freeze().plugins
    frontend = recorded.contributor.frontend
    assert frontend.entry == "index.js" and len(frontend.revision) == 64  # type: ignore[union-attr]
    assert frontend.files["index.js"].content == b"export default {}"  # type: ignore[union-attr]
    with pytest.raises(FileNotFoundError):
        registry.plugin(make_plugin("acme.none", frontend=BrowserAssets("acme.none", tmp_path / "absent")))
    assert namespaces(registry) == ["acme.assets"]


# -- 6. settings -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("namespace", ["a", "acme.notes", "acme_notes-2", "a" + "b" * 95])
def test_namespaces_accepted(namespace: str) -> None:
    accepted(backend_only(namespace))


@pytest.mark.parametrize("namespace", ["", "a" + "b" * 96, "Acme", "1acme", ".acme", "acme/notes", "acme notes"])
def test_namespaces_refused(namespace: str) -> None:
    refused(backend_only(namespace), "invalid plugin namespace")


def fields(n: int) -> tuple[SettingsField, ...]:
    return tuple(SettingsField(f"f{i}", f"F{i}", "boolean", False) for i in range(n))


def test_thirty_one_fields_of_a_plugins_own_and_no_more() -> None:
    accepted(backend_only(fields=fields(31)))
    refused(backend_only(fields=fields(32)), "1 to 32 settings fields")


@pytest.mark.parametrize(
    ("field", "match"),
    [
        (SettingsField("enabled", "Mine", "boolean", True), "duplicate settings key 'enabled'"),
        (SettingsField("Limit", "L", "integer", 1), "invalid settings key"),
        (SettingsField("a" + "b" * 64, "L", "integer", 1), "invalid settings key"),
        (SettingsField("limit", "L", "float", 1), "unknown settings kind"),  # type: ignore[arg-type]
        (SettingsField("label", "L", "string", "", max_length=0), "max_length must be 1 to 4096"),
        (SettingsField("label", "L", "string", "", max_length=4097), "max_length must be 1 to 4096"),
        (SettingsField("limit", "L", "integer", 5, minimum=6, maximum=5), "minimum is greater than maximum"),
        (SettingsField("limit", "L", "integer", True), "invalid default for limit: expected integer"),
        (SettingsField("limit", "L", "integer", 0, minimum=1), "invalid default for limit: outside allowed range"),
        (SettingsField("limit", "L", "integer", 10, maximum=9), "outside allowed range"),
        (SettingsField("label", "L", "string", "abcd", max_length=3), "maximum length is 3"),
        (SettingsField("flag", "F", "boolean", 1), "invalid default for flag: expected boolean"),
        (SettingsField("label", "L", "string", 3), "expected string"),
    ],
)
def test_settings_fields_refused(field: SettingsField, match: str) -> None:
    refused(backend_only(fields=(field,)), match)


@pytest.mark.parametrize(
    "field",
    [
        SettingsField("a" + "b" * 63, "L", "integer", 1),
        SettingsField("label", "L", "string", "", max_length=1),
        SettingsField("label", "L", "string", "x" * 4096, max_length=4096),
        SettingsField("limit", "L", "integer", 5, minimum=5, maximum=5),
        SettingsField("limit", "L", "integer", -3),
    ],
)
def test_settings_fields_accepted_at_their_edges(field: SettingsField) -> None:
    accepted(backend_only(fields=(field,)))


def test_the_browser_binding_rules() -> None:
    refused(make_plugin("acme.a", module="acme_page"), "invalid browser module id")
    refused(make_plugin("acme.b", frontend=BrowserModule("acme.b", "x", ("nope",))), "undeclared settings: nope")
    refused(make_plugin("acme.c", frontend=BrowserModule("acme.c", "x", ("limit", "limit"))), "must be unique")
    accepted(make_plugin("acme.d", frontend=BrowserModule("a" + "b" * 95, "x")))
    refused(make_plugin("acme.e", frontend=BrowserModule("a" + "b" * 96, "x")), "invalid browser module id")


@pytest.mark.parametrize(
    ("field", "value", "valid"),
    [
        ("boolean", True, True),
        ("boolean", 1, False),
        ("integer", 1, True),
        ("integer", True, False),
        ("integer", 1.0, False),
        ("integer", "1", False),
        ("string", "x", True),
        ("string", b"x", False),
    ],
)
def test_values_are_checked_by_exact_type(field: str, value: object, valid: bool) -> None:
    declared = SettingsField("k", "K", field, {"boolean": False, "integer": 0, "string": ""}[field])  # type: ignore[arg-type]
    if valid:
        assert validate_value(declared, value) is value
    else:
        with pytest.raises(SettingsError, match=f"k: expected {field}"):
            validate_value(declared, value)


# -- 7. uniqueness across plugins ---------------------------------------------------------------------------
def test_a_namespace_and_a_browser_module_are_registered_once() -> None:
    registry = accepted(make_plugin("acme.one"))
    refused(backend_only("acme.one"), "Duplicate plugin namespace", registry)
    refused(make_plugin("acme.two", module="acme.one"), "Duplicate browser module", registry)
    accepted(backend_only("acme.two"), registry)  # no browser part: no module to collide


def test_settings_are_checked_before_uniqueness() -> None:
    registry = accepted(make_plugin("acme.one"))
    refused(backend_only("acme.one", fields=fields(32)), "settings fields", registry)


# -- loading: rollback, attribution, the operator's settings ---------------------------------------------------
def load(*entries: dict[str, Any], diagnostics: DiagnosticsList | None = None, **kwargs: Any) -> Any:
    config = AppConfig(plugins=[PluginEntry(**e) for e in entries])
    return load_extensions(
        config,
        entry_points=EntryPointIndex(),
        diagnostics=diagnostics if diagnostics is not None else DiagnosticsList(),
        **kwargs,
    )


def test_a_failing_install_rolls_its_plugins_back_positionally() -> None:
    ext = load(
        {"name": "first", "use": f"{F}:fails_after_plugin", "config": {"namespace": "acme.first"}, "enabled": False},
        {"name": "kept", "use": f"{F}:install", "config": {"namespaces": ["acme.kept"]}},
        {"name": "doomed", "use": f"{F}:fails_after_plugin"},
    )
    assert [(c.label, c.contributor.namespace) for c in ext.plugins] == [("kept", "acme.kept")]
    assert ext.loaded == (f"{F}:install",)


def test_a_second_instance_failing_on_a_duplicate_keeps_the_first() -> None:
    diagnostics = DiagnosticsList()
    ext = load(
        {"name": "one", "use": f"{F}:install", "config": {"namespaces": ["acme.a"]}},
        {"name": "two", "use": f"{F}:install", "config": {"namespaces": ["acme.b", "acme.a"]}},
        diagnostics=diagnostics,
    )
    assert [(c.label, c.position, c.contributor.namespace) for c in ext.plugins] == [("one", 0, "acme.a")]
    (problem,) = diagnostics.snapshot()
    assert "Duplicate plugin namespace: acme.a" in problem.message


def test_the_operators_settings_reach_the_plugin() -> None:
    settings = {"acme.notes": {"enabled": True, "limit": 50, "label": "mine"}}
    ext = load({"name": "notes", "use": f"{F}:install", "settings": settings})
    (recorded,) = ext.plugins
    assert dict(recorded.contributor.settings) == {"enabled": True, "limit": 50, "label": "mine", "verbose": False}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"limit": "ten"}, "settings['acme.notes'].limit: expected integer, got str 'ten'"),
        ({"limit": True}, "settings['acme.notes'].limit: expected integer, got bool True"),
        ({"limit": 51}, "settings['acme.notes'].limit: outside allowed range (1..50), got 51"),
        ({"limit": 0}, "settings['acme.notes'].limit: outside allowed range (1..50), got 0"),
        ({"label": "123456789"}, "settings['acme.notes'].label: maximum length is 8"),
        ({"enabled": 1}, "settings['acme.notes'].enabled: expected boolean"),
        ({"colour": "red"}, "settings['acme.notes'].colour: unknown setting (this plugin declares: enabled, limit"),
    ],
)
def test_a_bad_setting_is_one_line_naming_file_record_and_field(
    values: dict[str, Any], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    diagnostics = DiagnosticsList()
    with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
        ext = load(
            {"name": "notes", "use": f"{F}:install", "settings": {"acme.notes": values}},
            diagnostics=diagnostics,
            config_file="/etc/deerflow/config.yaml",
        )
    assert ext.plugins == () and ext.loaded == ()
    (problem,) = diagnostics.snapshot()
    assert f"/etc/deerflow/config.yaml: plugins[notes].{message}" in problem.message
    assert "\n" not in problem.message


def test_settings_at_their_edges_are_accepted() -> None:
    for values in ({"limit": 1}, {"limit": 50}, {"label": "12345678"}, {"label": ""}):
        (recorded,) = load({"name": "notes", "use": f"{F}:install", "settings": {"acme.notes": values}}).plugins
        assert {k: recorded.contributor.settings[k] for k in values} == values


def test_settings_for_a_namespace_the_install_never_registered_fail_it() -> None:
    diagnostics = DiagnosticsList()
    ext = load(
        {"name": "notes", "use": f"{F}:install", "settings": {"acme.note": {"limit": 3}}},
        diagnostics=diagnostics,
    )
    assert ext.plugins == ()
    (problem,) = diagnostics.snapshot()
    assert (
        "config.yaml: plugins[notes].settings['acme.note']: this extension registered no plugin of that namespace "
        "(it registered: acme.notes)"
    ) in problem.message


def test_a_refusal_the_extension_swallowed_still_surfaces_through_its_settings() -> None:
    diagnostics = DiagnosticsList()
    load(
        {"name": "s", "use": f"{F}:swallows_refusal", "settings": {"acme.swallowed": {"enabled": True}}},
        diagnostics=diagnostics,
    )
    (problem,) = diagnostics.snapshot()
    assert "registered no plugin of that namespace (it registered: none)" in problem.message


def test_a_required_entry_with_a_bad_setting_stops_startup() -> None:
    with pytest.raises(ExtensionLoadError):
        load({"name": "notes", "use": f"{F}:install", "required": True, "settings": {"acme.notes": {"limit": 99}}})


@pytest.mark.parametrize("bad", [{"acme.notes": {"limit": 1.5}}, {"acme.notes": {"limit": [1]}}, {"acme.notes": 3}])
def test_settings_values_of_no_setting_kind_are_refused_by_the_config_schema(bad: Any) -> None:
    with pytest.raises(ValueError, match="settings"):
        PluginEntry(name="notes", use=f"{F}:install", settings=bad)


def test_no_settings_key_is_written_back_for_a_record_without_one() -> None:
    assert "settings" not in PluginEntry(name="n", use="u").model_dump(exclude_defaults=True)
