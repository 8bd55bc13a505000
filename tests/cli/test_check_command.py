"""deerflow-ext extensions check: one line per property, exit codes, the loads checked first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deerflow_ext import cli


def write(path: Path, plugins: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"plugins": plugins}), encoding="utf-8")
    return path


def test_every_property_is_one_line_and_a_list_that_holds_them_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        tmp_path / "config.yaml",
        [
            {"name": "tally", "use": "testing.order_extensions:tally"},
            {"name": "sturdy", "use": "testing.order_extensions:sturdy"},
            {"name": "off", "use": "not.installed:install", "enabled": False},
        ],
    )
    assert cli.main(["extensions", "check", "--config", str(config), "--examples", "2", "--seed", "7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"checking 2 plugins from {config} (tally, sturdy), seed 7"
    assert [line.split("  ")[0] for line in lines[1:5]] == ["PASS"] * 4
    assert "(2 examples, " in lines[1] and "(10 examples, " in lines[2]  # loader-only ones run 5x
    assert lines[5] == "4 properties: all hold"


def test_a_list_that_does_not_load_is_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path / "config.yaml", [{"name": "ghost", "use": "not.installed:install"}])
    assert cli.main(["extensions", "check", "--config", str(config)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "FAIL  every entry loads: 1 failure(s); `deerflow-ext extensions doctor` says more"
    assert out[2].startswith("      Extension not.installed:install: cannot import not.installed:install")


def test_nothing_enabled_is_nothing_to_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path / "config.yaml", [{"name": "off", "use": "x:y", "enabled": False}])
    assert cli.main(["extensions", "check", "--config", str(config)]) == 0
    assert capsys.readouterr().out == f"{config}: no enabled plugins, nothing to check\n"


def test_an_invalid_config_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A config.yaml the Gateway would refuse exits 1 under every command (deerflow_ext.exitcodes).
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  - name: a\n    use: b\n    enable: true\n", encoding="utf-8")
    assert cli.main(["extensions", "check", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "enable" in err


def test_examples_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["extensions", "check", "--examples", "0"])
    assert info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_without_the_kits_test_dependencies_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "deerflow_ext.testing.properties", raising=False)
    monkeypatch.delitem(sys.modules, "deerflow_ext.testing.strategies", raising=False)
    config = write(tmp_path / "config.yaml", [{"name": "tally", "use": "testing.order_extensions:tally"}])
    assert cli.main(["extensions", "check", "--config", str(config)]) == 2
    from deerflow_ext.distribution import host_source

    # From the source this host was installed from (here a checkout), not an index without it.
    kit = host_source().install_arguments("test")
    assert kit != "'deerflow-ext[test]'"
    assert capsys.readouterr().err == (
        "error: extensions check needs the author kit's test dependencies (hypothesis is missing): "
        f"python3 -m pip install {kit}\n"
    )


def test_the_kit_itself_loads_without_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    monkeypatch.setitem(sys.modules, "hypothesis", None)
    for name in [n for n in sys.modules if n.startswith("deerflow_ext.testing")]:
        monkeypatch.delitem(sys.modules, name)
    kit = importlib.import_module("deerflow_ext.testing")
    assert kit.Plugin and kit.start_host and kit.plugins_yaml  # the fixtures' machinery
    with pytest.raises(ImportError):
        kit.check_same_result  # noqa: B018 - the lazy import is the point
