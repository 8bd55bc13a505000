"""The ``deerflow_host`` and ``extension_loader`` fixtures against the real Gateway."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from deerflow_ext.testing import HostFactory, HostHarness, LoaderFactory
from testing import kit_extension
from testing.kit_extension import Events


def test_extension_loader_installs_an_entry_without_a_gateway(extension_loader: LoaderFactory) -> None:
    result = extension_loader(kit_extension.install, {"greeting": "hi"})
    assert result.loaded == ("testing.kit_extension:install",)
    assert len(result.extensions.task_lifecycle) == 1
    assert len(result.extensions.services) == 1
    assert not result.diagnostics.snapshot()


def test_extension_loader_reports_a_failing_inline_install(extension_loader: LoaderFactory) -> None:
    def install(registry: Any, config: Mapping[str, Any]) -> None:
        registry.task_lifecycle(kit_extension.Recorder())
        raise ValueError("bad threshold")

    result = extension_loader(install, name="broken")
    assert result.loaded == ()
    assert not result.extensions.task_lifecycle  # rolled back, not half-registered
    (diagnostic,) = result.diagnostics.snapshot()
    assert "bad threshold" in diagnostic.message


def test_a_lead_run_brackets_the_task_with_start_and_stop(deerflow_host: HostFactory) -> None:
    host: HostHarness = deerflow_host(kit_extension.install)
    outcome = host.run("hello there")
    assert outcome.event_names[0] == "metadata"
    assert outcome.event_names[-1] == "end"
    assert outcome.run["run_id"] == outcome.run_id
    assert outcome.outcome == "completed"
    assert outcome.answer
    # the stream ends only after on_task_stop returned, so no polling is needed here
    events = host.app_store.get(Events).snapshot()
    assert events == [("start", "lead", events[0][2]), ("stop", "lead", "completed")]
    assert not host.diagnostics.snapshot()


def test_a_delegating_run_includes_a_subagent_task(deerflow_host: HostFactory) -> None:
    host = deerflow_host(kit_extension.install)
    host.run("delegate: count the apples")
    kinds = [(what, kind) for what, kind, _ in host.app_store.get(Events).snapshot()]
    assert kinds[0] == ("start", "lead") and kinds[-1] == ("stop", "lead")
    assert ("start", "subagent") in kinds and ("stop", "subagent") in kinds
    assert kinds.index(("start", "subagent")) < kinds.index(("stop", "subagent"))


def test_routers_services_and_closing(deerflow_host: HostFactory) -> None:
    host = deerflow_host(kit_extension.install, {"greeting": "hi"}, name="kit")
    assert host.client.get("/api/ext/kit/hello").json() == {"greeting": "hi", "started": True}
    lifetime = kit_extension.LIFETIMES[-1]
    assert lifetime.deps is not None and lifetime.deps.session_factory is not None
    assert lifetime.deps.app_store is host.app_store
    host.close()
    assert lifetime.stopped


def test_a_runs_thread_can_be_reused(deerflow_host: HostFactory) -> None:
    host = deerflow_host(kit_extension.install)
    first = host.run("first question")
    second = host.run("second question", thread_id=first.thread_id)
    assert second.thread_id == first.thread_id and second.run_id != first.run_id
    stops = [e for e in host.app_store.get(Events).snapshot() if e[0] == "stop"]
    assert len(stops) == 2


def test_a_failing_optional_extension_is_a_diagnostic_and_the_host_still_runs(deerflow_host: HostFactory) -> None:
    def install(registry: Any, config: Mapping[str, Any]) -> None:
        raise RuntimeError("no credentials")

    host = deerflow_host(install, name="flaky")
    assert any("no credentials" in d.message for d in host.diagnostics.snapshot())
    assert host.run("still works").event_names[-1] == "end"


def test_a_failing_required_extension_stops_the_host(deerflow_host: HostFactory) -> None:
    from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError

    def install(registry: Any, config: Mapping[str, Any]) -> None:
        raise RuntimeError("audit database unreachable")

    with pytest.raises(ExtensionLoadError, match="failed to install"):
        deerflow_host(install, name="audit", required=True)


def test_an_entry_point_name_loads_like_an_operators_config(
    deerflow_host: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A distribution on sys.path declaring the entry point, as pip would have installed it.
    info = tmp_path / "site" / "kit_probe-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kit-probe\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[deerflow.extensions]\nkit_probe = testing.kit_extension:install\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    host = deerflow_host("kit_probe", {"greeting": "by name"}, name="kit")
    # Attribution is the entry point's value, as in the Gateway's log lines.
    assert host.extensions.loaded == ("testing.kit_extension:install",)
    assert host.client.get("/api/ext/kit/hello").json()["greeting"] == "by name"
    assert host.run("hello").outcome == "completed"
    assert not host.diagnostics.snapshot()


def test_a_whole_plugins_list_loads_in_order_as_config_yaml_would(deerflow_host: HostFactory) -> None:
    from deerflow_ext.testing import Plugin
    from testing import order_extensions

    host = deerflow_host(
        [
            Plugin(kit_extension.install, {"greeting": "first"}),
            {"name": "echo", "use": order_extensions.echo},  # a record whose use is the function itself
            order_extensions.tally,
            "testing.order_extensions:tally",  # a second instance of the same use
        ]
    )
    assert [p.name for p in host.plugins] == ["kit", "echo", "tally", "order_extensions"]
    assert host.extensions.loaded == (
        "testing.kit_extension:install",
        "testing.order_extensions:echo",
        "testing.order_extensions:tally",
        "testing.order_extensions:tally",
    )
    assert [c.label for c in host.extensions.task_lifecycle] == ["kit", "echo", "tally", "order_extensions"]
    host.run("hello")
    # echo runs before both tallies, so it saw none of this run's stops
    assert host.app_store.get(order_extensions.Seen) == order_extensions.Seen(0)
    assert host.app_store.get(order_extensions.Stops).count == 2
    assert host.client.get("/api/ext/kit/hello").json()["greeting"] == "first"


def test_extension_loader_takes_a_list_and_rolls_back_only_the_failing_entry(extension_loader: LoaderFactory) -> None:
    from testing import order_extensions

    def broken(registry: Any, config: Mapping[str, Any]) -> None:
        registry.task_lifecycle(kit_extension.Recorder())
        raise ValueError("half installed")

    result = extension_loader([order_extensions.tally, broken, order_extensions.echo])
    assert [c.label for c in result.extensions.task_lifecycle] == ["tally", "echo"]
    assert [p.name for p in result.plugins] == ["tally", "test_host_fixture", "echo"]
    (diagnostic,) = result.diagnostics.snapshot()
    assert "half installed" in diagnostic.message


def test_a_list_takes_its_options_per_entry(deerflow_host: HostFactory) -> None:
    with pytest.raises(TypeError, match="per entry"):
        deerflow_host([kit_extension.install], {"greeting": "hi"})
