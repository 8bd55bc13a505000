"""Discovery: entry-point names, module:attr paths, attribution and the one scan."""

from __future__ import annotations

import importlib_metadata
import pytest

from deerflow_ext.extensions.plugin_loading import discovery
from deerflow_ext.extensions.plugin_loading.discovery import (
    ENTRY_POINT_GROUP,
    EntryPointIndex,
    ExtensionImportError,
    ExtensionNotFoundError,
)

M = "extensions.fixtures_plugins"


def test_entry_point_name_resolves_to_its_value() -> None:
    index = EntryPointIndex.from_mapping({"acme": f"{M}:good"})
    resolved = index.resolve("acme")
    from extensions import fixtures_plugins

    assert resolved.install is fixtures_plugins.good
    assert resolved.attribution == f"{M}:good"
    assert resolved.entry_point == "acme"


def test_module_attr_resolves_and_finds_its_entry_point_when_one_matches() -> None:
    index = EntryPointIndex.from_mapping({"acme": f"{M}:good"})
    assert index.resolve(f"{M}:good").entry_point == "acme"
    assert index.resolve(f"{M}:unmarked").entry_point is None
    assert index.resolve(f"{M}:unmarked").attribution == f"{M}:unmarked"


def test_dotted_attribute_path() -> None:
    resolved = EntryPointIndex().resolve(f"{M}:Observer.on_agent_assembled")
    assert callable(resolved.install)


def test_unknown_name_lists_installed_names() -> None:
    index = EntryPointIndex.from_mapping({"b": f"{M}:good", "a": f"{M}:good"})
    with pytest.raises(ExtensionNotFoundError, match=r"no extension named 'zzz'.*\(installed: a, b\)"):
        index.resolve("zzz")
    with pytest.raises(ExtensionNotFoundError, match=r"installed: none"):
        EntryPointIndex().resolve("zzz")


@pytest.mark.parametrize(
    ("use", "fragment"),
    [
        ("no_such_module_xyz:install", "ModuleNotFoundError"),
        (f"{M}:missing_attr", "has no 'missing_attr'"),
        ("extensions.fixtures_broken:install", "broken at import time"),
        (f"{M}:not_callable", "not a callable"),
        (f"{M}:", "not a 'module:attr' path"),
    ],
)
def test_import_failures_are_extension_import_errors(use: str, fragment: str) -> None:
    with pytest.raises(ExtensionImportError, match=fragment):
        EntryPointIndex().resolve(use)


def test_attribution_is_known_without_importing() -> None:
    index = EntryPointIndex.from_mapping({"acme": "acme_audit:install"})
    assert index.attribution("acme") == "acme_audit:install"
    assert index.attribution("other:thing") == "other:thing"
    assert index.attribution("unknown") == "unknown"


def test_scan_reads_the_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake_entry_points(*, group: str) -> list[importlib_metadata.EntryPoint]:
        calls.append(group)
        return [importlib_metadata.EntryPoint("acme", f"{M}:good", group)]

    monkeypatch.setattr(discovery.importlib_metadata, "entry_points", fake_entry_points)
    index = EntryPointIndex.scan()
    index.resolve("acme")
    index.resolve("acme")
    index.attribution("acme")
    assert calls == [ENTRY_POINT_GROUP]
    assert index.names == ("acme",) and "acme" in index and len(index) == 1


def test_first_declaration_of_a_name_wins() -> None:
    index = EntryPointIndex(
        [
            importlib_metadata.EntryPoint("acme", f"{M}:good", ENTRY_POINT_GROUP),
            importlib_metadata.EntryPoint("acme", f"{M}:unmarked", ENTRY_POINT_GROUP),
        ]
    )
    assert index.attribution("acme") == f"{M}:good"


def test_describe_module_attr_uses_installed_metadata() -> None:
    # pluggy is certainly installed with metadata in the dev environment.
    info = EntryPointIndex().describe("pluggy:PluginManager")
    assert info is not None and info.distribution == "pluggy" and info.version


class _CountingDist:
    """A distribution stand-in that counts metadata reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.version = "1.2.3"

    @property
    def metadata(self) -> dict[str, str]:
        self.reads += 1
        return {"Name": "acme-dist"}


def test_distribution_metadata_is_read_on_first_access_only() -> None:
    dist = _CountingDist()
    # EntryPoint._for is private; it is how importlib_metadata itself attaches .dist, and the
    # only way to give an entry point a distribution without installing a package.
    ep = importlib_metadata.EntryPoint("acme", f"{M}:good", ENTRY_POINT_GROUP)._for(dist)
    index = EntryPointIndex([ep])
    resolved = index.resolve("acme")  # the load path: no metadata read
    assert dist.reads == 0
    assert (resolved.distribution, resolved.version) == ("acme-dist", "1.2.3")
    info = index.get("acme")
    assert info is not None and (info.distribution, info.version) == ("acme-dist", "1.2.3")
    assert dist.reads == 1


def test_a_module_path_finds_its_distribution_on_first_access_only(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[str] = []

    def packages_distributions() -> dict[str, list[str]]:
        walks.append("walk")
        return {"pluggy": ["pluggy"]}

    monkeypatch.setattr(importlib_metadata, "packages_distributions", packages_distributions)
    index = EntryPointIndex()
    resolved = index.resolve("pluggy:PluginManager")  # the load path: no walk of installed files
    assert walks == []
    assert resolved.distribution == "pluggy" and resolved.version
    assert walks == ["walk"]
