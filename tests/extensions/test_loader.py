"""load_extensions: steps 2.1 to 2.5, positional rollback, required, and the log lines."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ext.config.loading import app_config_from_text
from deerflow_ext.config.schema import AppConfig, PluginEntry
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.contract.registry import RegistrationError
from deerflow_ext.extensions.contract.snapshot import TablePrefix
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError, load_extensions
from deerflow_ext.extensions.plugin_loading.tables import TablePrefixCollisionError

M = "extensions.fixtures_plugins"
NO_EPS = EntryPointIndex()


def config(*entries: dict[str, Any]) -> AppConfig:
    return AppConfig(plugins=[PluginEntry(**e) for e in entries])


def load(cfg: AppConfig, **kwargs: Any):
    kwargs.setdefault("entry_points", NO_EPS)
    kwargs.setdefault("diagnostics", DiagnosticsList())
    return load_extensions(cfg, **kwargs)


def tags(contributions) -> list[Any]:
    return [c.contributor.tag for c in contributions]


# -- the spec's log lines, verbatim -----------------------------------------------------------
def test_summary_and_failure_lines_verbatim(caplog: pytest.LogCaptureFixture) -> None:
    eps = EntryPointIndex.from_mapping(
        {
            "acme_audit": f"{M}:good",
            "acme_costs": f"{M}:unmarked",
            "acme_broken": f"{M}:newer_patch",
        }
    )
    cfg = config(
        {"name": "audit", "use": "acme_audit"},
        {"name": "broken", "use": "acme_broken"},
        {"name": "costs", "use": "acme_costs"},
    )
    with caplog.at_level(logging.INFO, logger="deerflow_ext.extensions"):
        ext = load(cfg, entry_points=eps)
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "deerflow_ext.extensions"]
    assert messages == [
        (
            logging.ERROR,
            f"Extension {M}:newer_patch: extension requires extension-api 0.2.7, host provides 0.2.6. "
            "Install a matching version: pip install 'deerflow-extension-api>=0.2.7,<0.3'",
        ),
        (logging.INFO, f"Extensions loaded: 2/3 ({M}:good, {M}:unmarked); 2 loaded, 1 failed"),
    ]
    assert ext.summary == f"Extensions loaded: 2/3 ({M}:good, {M}:unmarked); 2 loaded, 1 failed"


def test_extensions_marked_for_deerflows_newest_and_oldest_0_2_both_load() -> None:
    """Pinned ``>=0.2.6,<0.3`` (DeerFlow's current examples) or ``>=0.2.0,<0.3``: both install."""
    ext = load(config({"name": "new", "use": f"{M}:deerflow_current"}, {"name": "old", "use": f"{M}:older_patch"}))
    assert ext.loaded == (f"{M}:deerflow_current", f"{M}:older_patch")
    assert [c.contributor.tag for c in ext.assembly_observers] == [("deerflow_current",), ("older_patch",)]
    assert not ext.diagnostics


def test_summary_counts_disabled_entries_in_the_total(caplog: pytest.LogCaptureFixture) -> None:
    cfg = config(
        {"name": "a", "use": f"{M}:good"},
        {"name": "b", "use": f"{M}:unmarked", "enabled": False},
    )
    with caplog.at_level(logging.INFO, logger="deerflow_ext.extensions"):
        ext = load(cfg)
    assert caplog.messages == [f"Extensions loaded: 1/2 ({M}:good); 1 loaded, 1 disabled"]
    assert ext.total == 2 and ext.loaded == (f"{M}:good",)


def test_empty_config_summary() -> None:
    assert load(AppConfig()).summary == "Extensions loaded: 0/0 (none)"


# -- required ---------------------------------------------------------------------------------
def test_required_failure_raises_with_the_spec_text() -> None:
    eps = EntryPointIndex.from_mapping({"acme_audit": "acme_audit:install"})
    diagnostics = DiagnosticsList()
    with pytest.raises(ExtensionLoadError) as info:
        load(
            config({"name": "audit", "use": "acme_audit", "required": True}),
            entry_points=eps,
            diagnostics=diagnostics,
        )
    assert str(info.value) == "required extension acme_audit:install failed to install"
    assert f"{type(info.value).__name__}: {info.value}" == (
        "ExtensionLoadError: required extension acme_audit:install failed to install"
    )
    assert isinstance(info.value.__cause__, ImportError)
    [diagnostic] = diagnostics.snapshot()
    assert diagnostic.extension == "acme_audit:install" and diagnostic.phase == "load"


@pytest.mark.parametrize(
    "use",
    [f"{M}:newer_patch", f"{M}:configurable", "extensions.fixtures_broken:install", "nowhere_at_all"],
)
def test_every_failing_step_aborts_a_required_entry(use: str) -> None:
    entry = {
        "name": "x",
        "use": use,
        "required": True,
        "config": {"tag": "t", "kinds": ["observer"], "fail_after": 1},
    }
    with pytest.raises(ExtensionLoadError, match=r"^required extension .* failed to install$"):
        load(config({"name": "ok", "use": f"{M}:good"}, entry))


def test_optional_failure_is_skipped_and_later_entries_still_load() -> None:
    diagnostics = DiagnosticsList()
    ext = load(
        config({"name": "bad", "use": "extensions.fixtures_broken:install"}, {"name": "ok", "use": f"{M}:good"}),
        diagnostics=diagnostics,
    )
    assert ext.loaded == (f"{M}:good",)
    [d] = diagnostics.snapshot()
    assert d.extension == "extensions.fixtures_broken:install"
    assert "broken at import time" in d.message and d.error_type == "ExtensionImportError"


# -- steps and attribution --------------------------------------------------------------------
def test_disabled_entry_is_never_imported() -> None:
    import sys

    sys.modules.pop("extensions.fixtures_broken", None)
    ext = load(config({"name": "off", "use": "extensions.fixtures_broken:install", "enabled": False}))
    assert "extensions.fixtures_broken" not in sys.modules
    assert ext.loaded == () and ext.total == 1


def test_unresolvable_use_is_attributed_to_the_raw_use_and_lists_installed_names() -> None:
    diagnostics = DiagnosticsList()
    eps = EntryPointIndex.from_mapping({"zeta": f"{M}:good", "alpha": f"{M}:unmarked"})
    load(config({"name": "x", "use": "acme_missing"}), entry_points=eps, diagnostics=diagnostics)
    [d] = diagnostics.snapshot()
    assert d.extension == "acme_missing"
    assert "installed: alpha, zeta" in d.message


def test_entry_point_name_is_attributed_to_its_value() -> None:
    ext = load(config({"name": "x", "use": "acme"}), entry_points=EntryPointIndex.from_mapping({"acme": f"{M}:good"}))
    assert ext.loaded == (f"{M}:good",)
    assert ext.assembly_observers[0].extension == f"{M}:good"
    assert ext.assembly_observers[0].label == "x"


def test_not_callable_is_a_load_failure() -> None:
    diagnostics = DiagnosticsList()
    load(config({"name": "x", "use": f"{M}:not_callable"}), diagnostics=diagnostics)
    assert "not a callable install()" in diagnostics.snapshot()[0].message


def test_install_receives_a_shallow_copy_of_its_config() -> None:
    entry = PluginEntry(name="x", use=f"{M}:mutates_config", config={"nested": {}})
    load(AppConfig(plugins=[entry]))
    assert "touched" not in entry.config  # the top level is a copy...
    assert entry.config["nested"] == {"seen": True}  # ...a shallow one, as the spec says


def test_unsupported_registry_method_fails_and_rolls_back() -> None:
    diagnostics = DiagnosticsList()
    ext = load(config({"name": "x", "use": f"{M}:unsupported_method"}), diagnostics=diagnostics)
    assert ext.assembly_observers == () and ext.loaded == ()
    [d] = diagnostics.snapshot()
    assert "'tools'" in d.message and d.error_type == "AttributeError"


def test_async_install_is_refused() -> None:
    diagnostics = DiagnosticsList()
    ext = load(config({"name": "x", "use": f"{M}:async_install"}), diagnostics=diagnostics)
    assert ext.loaded == () and "awaitable" in diagnostics.snapshot()[0].message


@pytest.mark.parametrize("use", ["interrupts", "exits"])
def test_keyboard_interrupt_or_system_exit_from_install_is_a_load_failure(use: str) -> None:
    # The extension raised it itself (no signal arrived): its failure, rolled back (exits.py).
    diagnostics = DiagnosticsList()
    ext = load(config({"name": "x", "use": f"{M}:{use}"}), diagnostics=diagnostics)
    assert ext.assembly_observers == () and ext.loaded == ()
    [d] = diagnostics.snapshot()
    assert d.phase == "load" and d.message.startswith("install() failed: ")
    assert d.error_type == ("KeyboardInterrupt" if use == "interrupts" else "SystemExit")


def test_system_exit_from_a_required_install_stops_startup() -> None:
    with pytest.raises(ExtensionLoadError) as caught:
        load(config({"name": "x", "use": f"{M}:exits", "required": True}), diagnostics=DiagnosticsList())
    assert isinstance(caught.value.__cause__, SystemExit)


def test_an_operators_ctrl_c_while_installing_propagates_after_rollback() -> None:
    # A real SIGINT delivered during install() is the operator's, not the extension's. The
    # process's SIGINT handler is set as a command's is (Python's default): earlier tests in
    # this process may leave another one behind, which would make this test depend on order.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            load(config({"name": "x", "use": f"{M}:signals_itself"}))
    finally:
        signal.signal(signal.SIGINT, previous)


def test_registering_after_install_raises() -> None:
    from extensions import fixtures_plugins

    load(config({"name": "x", "use": f"{M}:keeps_registry"}))
    with pytest.raises(RegistrationError):
        fixtures_plugins.kept_registry().agent_assembly_observer(fixtures_plugins.Observer(("late",)))


def test_malformed_marker_is_a_clear_refusal() -> None:
    diagnostics = DiagnosticsList()
    load(config({"name": "x", "use": f"{M}:malformed_marker"}), diagnostics=diagnostics)
    assert "'zero.two', which is not a version" in diagnostics.snapshot()[0].message


def test_one_entry_point_scan_per_load(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import importlib_metadata

    from deerflow_ext.extensions.plugin_loading import discovery

    scans: list[str] = []

    def entry_points(*, group: str) -> list[importlib_metadata.EntryPoint]:
        scans.append(group)
        return [
            importlib_metadata.EntryPoint("acme_audit", f"{M}:good", group),
            importlib_metadata.EntryPoint("acme_costs", f"{M}:unmarked", group),
            importlib_metadata.EntryPoint("acme_off", "extensions.fixtures_broken:install", group),
        ]

    monkeypatch.setattr(discovery.importlib_metadata, "entry_points", entry_points)
    cfg = config(
        {"name": "audit", "use": "acme_audit", "table_prefix": "audit_"},
        {"name": "costs", "use": "acme_costs"},
        {"name": "off", "use": "acme_off", "enabled": False, "table_prefix": "off_"},
        {"name": "direct", "use": f"{M}:older_patch"},
        {"name": "missing", "use": "acme_missing"},
    )
    sys.modules.pop("extensions.fixtures_broken", None)
    ext = load_extensions(cfg, diagnostics=DiagnosticsList())
    assert scans == ["deerflow.extensions"]
    assert "extensions.fixtures_broken" not in sys.modules  # the disabled entry point was never loaded
    assert ext.loaded == (f"{M}:good", f"{M}:unmarked", f"{M}:older_patch")


def test_load_does_not_publish() -> None:
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions

    before = get_loaded_extensions()
    load(config({"name": "x", "use": f"{M}:good"}))
    assert get_loaded_extensions() is before


# -- table prefixes in the loader --------------------------------------------------------------
def test_prefix_registered_for_disabled_and_failing_entries() -> None:
    ext = load(
        config(
            {"name": "off", "use": f"{M}:good", "enabled": False, "table_prefix": "off_"},
            {"name": "bad", "use": "extensions.fixtures_broken:install", "table_prefix": "bad_"},
            {"name": "ok", "use": f"{M}:good", "table_prefix": "ok_"},
        )
    )
    assert ext.table_prefixes == (
        TablePrefix("off_", f"{M}:good", "off"),
        TablePrefix("bad_", "extensions.fixtures_broken:install", "bad"),
        TablePrefix("ok_", f"{M}:good", "ok"),
    )


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("required", [False, True])
def test_prefix_collision_aborts_whatever_required_says(required: bool, enabled: bool) -> None:
    import sys

    sys.modules.pop("extensions.fixtures_broken", None)
    diagnostics = DiagnosticsList()
    cfg = config(
        {"name": "ok", "use": f"{M}:good"},
        {
            "name": "x",
            "use": "extensions.fixtures_broken:install",
            "table_prefix": "run",
            "required": required,
            "enabled": enabled,
        },
    )
    with pytest.raises(TablePrefixCollisionError, match="runs"):
        load(cfg, diagnostics=diagnostics)
    assert "extensions.fixtures_broken" not in sys.modules  # aborted before any import
    assert diagnostics.snapshot()[0].phase == "tables"


def test_collision_uses_the_host_tables_it_is_given() -> None:
    cfg = config({"name": "x", "use": f"{M}:good", "table_prefix": "acme_"})
    with pytest.raises(TablePrefixCollisionError):
        load(cfg, host_tables=("acme_things",))
    assert load(cfg, host_tables=()).loaded == (f"{M}:good",)


# -- the property: exactly the successful entries' registrations, in order ---------------------
KINDS = st.sampled_from(["observer", "lifecycle", "service"])


@st.composite
def plugin_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=0, max_value=7))
    entries = []
    for i in range(count):
        shape = draw(st.sampled_from(["good", "halfway", "disabled", "import", "marker", "unknown"]))
        kinds = draw(st.lists(KINDS, max_size=4))
        entry: dict[str, Any] = {
            "name": f"e{i}",
            "use": f"{M}:configurable",
            "config": {"tag": i, "kinds": kinds},
        }
        if shape == "halfway":
            entry["config"]["fail_after"] = draw(st.integers(min_value=0, max_value=len(kinds)))
        elif shape == "disabled":
            entry["enabled"] = False
        elif shape == "import":
            entry["use"] = "extensions.fixtures_broken:install"
        elif shape == "marker":
            entry["use"] = f"{M}:newer_patch"
        elif shape == "unknown":
            entry["use"] = "not_installed_anywhere"
        entries.append(entry)
    return entries


def expected_registrations(entries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    fields = {"observer": "assembly_observers", "lifecycle": "task_lifecycle", "service": "services"}
    out: dict[str, list[Any]] = {name: [] for name in fields.values()}
    for entry in entries:
        ok = entry.get("enabled", True) and entry["use"] == f"{M}:configurable"
        ok = ok and entry["config"].get("fail_after") is None
        if ok:
            for n, kind in enumerate(entry["config"]["kinds"]):
                out[fields[kind]].append((entry["config"]["tag"], n))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plugin_entries())
def test_snapshot_holds_exactly_the_successful_registrations_in_order(entries: list[dict[str, Any]]) -> None:
    ext = load(config(*entries))
    expected = expected_registrations(entries)
    assert tags(ext.assembly_observers) == expected["assembly_observers"]
    assert tags(ext.task_lifecycle) == expected["task_lifecycle"]
    assert tags(ext.services) == expected["services"]
    succeeded = [
        e
        for e in entries
        if e.get("enabled", True) and e["use"] == f"{M}:configurable" and e["config"].get("fail_after") is None
    ]
    assert ext.loaded == tuple(f"{M}:configurable" for _ in succeeded)
    assert ext.total == len(entries)
    # Attribution is positional: every contribution names the entry (position, label) it came from.
    for contribution in (*ext.assembly_observers, *ext.task_lifecycle, *ext.services):
        tag, _ = contribution.contributor.tag
        assert contribution.position == tag and contribution.label == f"e{tag}"
        assert contribution.plugin_name.startswith(f"{tag}:{M}:configurable#")


def test_failing_second_instance_never_removes_the_first() -> None:
    ext = load(
        config(
            {
                "name": "first",
                "use": f"{M}:configurable",
                "config": {"tag": "a", "kinds": ["observer", "service"]},
            },
            {
                "name": "second",
                "use": f"{M}:configurable",
                "config": {"tag": "b", "kinds": ["observer", "service"], "fail_after": 1},
            },
        )
    )
    assert tags(ext.assembly_observers) == [("a", 0)]
    assert tags(ext.services) == [("a", 1)]
    assert ext.loaded == (f"{M}:configurable",)


# -- a CancelledError while loading is the extension's own (spec, Cancellation) ----------------
CANCEL_MODULES = {
    "cancel_on_import": "import asyncio\nraise asyncio.CancelledError('import-time timeout')\n",
    "cancel_in_install": (
        "import asyncio\n"
        "from deerflow_extension_api import extension\n"
        "from extensions.fixtures_plugins import Observer\n\n"
        "@extension(api='0.2.1')\n"
        "def install(registry, config):\n"
        "    registry.agent_assembly_observer(Observer(('half',)))\n"
        "    raise asyncio.CancelledError('install-time timeout')\n"
    ),
}


@pytest.fixture
def cancelling_modules(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, source in CANCEL_MODULES.items():
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.usefixtures("cancelling_modules")
@pytest.mark.parametrize(
    ("use", "text"),
    [
        ("cancel_on_import:install", "cannot import cancel_on_import:install: CancelledError: import-time timeout"),
        ("cancel_in_install:install", "install() failed: CancelledError: install-time timeout"),
    ],
)
def test_a_cancelled_error_while_loading_is_an_install_failure(
    use: str, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    diagnostics = DiagnosticsList()
    with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
        ext = load(config({"name": "bad", "use": use}, {"name": "ok", "use": f"{M}:good"}), diagnostics=diagnostics)
    assert ext.loaded == (f"{M}:good",)
    assert tags(ext.assembly_observers) == [("good", None)]  # the half-install is rolled back
    [d] = diagnostics.snapshot()
    assert (d.extension, d.phase, d.message, d.error_type) == (use, "load", text, "CancelledError")
    assert f"Extension {use}: {text}" in caplog.messages


@pytest.mark.usefixtures("cancelling_modules")
@pytest.mark.parametrize("use", ["cancel_on_import:install", "cancel_in_install:install"])
async def test_a_cancelled_error_while_loading_inside_a_task_is_still_the_extensions(use: str) -> None:
    # create_app may run inside a task; loading is synchronous, so it cannot be the host's.
    ext = await asyncio.create_task(_load_async(config({"name": "bad", "use": use})))
    assert ext.loaded == ()


async def _load_async(cfg: AppConfig) -> Any:
    return load(cfg)


@pytest.mark.usefixtures("cancelling_modules")
@pytest.mark.parametrize("use", ["cancel_on_import:install", "cancel_in_install:install"])
def test_a_required_extension_raising_cancelled_error_stops_startup(use: str) -> None:
    with pytest.raises(ExtensionLoadError, match=f"^required extension {use} failed to install$") as info:
        load(config({"name": "bad", "use": use, "required": True}))
    assert isinstance(info.value.__cause__, asyncio.CancelledError)


# -- two records of one use (DeerFlow: valid; the same extension twice, own config each) ---------
def test_two_unnamed_records_sharing_a_use_both_load_with_their_own_config() -> None:
    cfg = app_config_from_text(
        f"plugins:\n"
        f"  - use: {M}:configurable\n    config: {{tag: first, kinds: [observer]}}\n"
        f"  - use: {M}:configurable\n    config: {{tag: second, kinds: [observer]}}\n"
        f"  - {{name: third, use: {M}:configurable, config: {{tag: third, kinds: [observer]}}}}\n"
    )
    # Told apart by their place among the unnamed records of that use: <use>, <use>#2, ...
    assert [p.name for p in cfg.plugins] == [f"{M}:configurable", f"{M}:configurable#2", "third"]
    ext = load(cfg)
    assert ext.loaded == (f"{M}:configurable",) * 3
    assert tags(ext.assembly_observers) == [("first", 0), ("second", 0), ("third", 0)]
