"""Plugin entries: records as config.yaml has them, names as an operator writes them, YAML to paste."""

from __future__ import annotations

import dataclasses

import pytest

from deerflow_ext.config.loading import app_config_from_text
from deerflow_ext.config.schema import PluginEntry
from deerflow_ext.testing import Plugin, plugin_records, plugins_yaml
from deerflow_ext.testing.check import plugins_of
from testing import kit_extension, order_extensions


def test_the_kit_entry_has_every_field_of_a_plugins_record() -> None:
    # A field the config schema gains must be one line in Plugin, or the kit cannot pass it on.
    assert {f.name for f in dataclasses.fields(Plugin)} >= set(PluginEntry.model_fields)


def test_a_record_names_use_first_and_leaves_defaults_out() -> None:
    plugin = Plugin(kit_extension.install, {"greeting": "hi"}, required=True, table_prefix="kit_")
    assert plugin.record() == {
        "name": "kit",
        "use": "testing.kit_extension:install",
        "config": {"greeting": "hi"},
        "required": True,
        "table_prefix": "kit_",
    }
    assert Plugin("observers").record() == {"name": "observers", "use": "observers"}


def test_names_come_from_the_extension_the_use_or_the_entry_and_repeat_with_a_suffix() -> None:
    entries = plugin_records(
        [order_extensions.tally, "deerflow_costs:install", order_extensions.tally, Plugin("costs", name="mine")]
    )
    assert [p.name for p in entries] == ["tally", "deerflow_costs", "tally-2", "mine"]
    assert all(isinstance(p.use, str) for p in entries)


def test_a_record_with_an_unknown_key_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"unknown plugins: record key\(s\) \['enable'\]"):
        Plugin.coerce({"use": "costs", "enable": False})
    with pytest.raises(TypeError, match="expected a Plugin"):
        Plugin.coerce(42)  # type: ignore[arg-type]


def test_the_yaml_is_a_config_that_loads_back_to_the_same_entries() -> None:
    plugins = [
        Plugin("costs", {"currency": "EUR", "input_per_million": 0.5}),
        Plugin(order_extensions.tally, required=True),
        Plugin("audit", table_prefix="audit_", enabled=False),
    ]
    text = plugins_yaml(plugins, comment="found by a check\nsecond line")
    assert text.startswith("# found by a check\n# second line\nplugins:\n  - name: costs\n")
    config = app_config_from_text(text)
    assert [p.record() for p in plugins_of(config)] == [p.record() for p in plugin_records(plugins)[:2]]
    assert [p.enabled for p in config.plugins] == [True, True, False]


def test_a_record_carries_package_and_intercept_to_the_loader() -> None:
    plugin = Plugin("observers", package="deerflow-observers", intercept=True)
    record = plugin.record()
    assert record == {"name": "observers", "use": "observers", "package": "deerflow-observers", "intercept": True}
    (entry,) = app_config_from_text(plugins_yaml([plugin]), "config.yaml").plugins
    assert (entry.package, entry.intercept) == ("deerflow-observers", True)
