"""deerflow-ext extensions list | enable | disable | doctor, and the lazily imported commands."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from cli.cli_helpers import install_entry_points, run
from deerflow_ext import cli
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex

M = "extensions.fixtures_plugins"

COMMENTED = f"""\
# production gateway -- do not reformat
plugins:
  - name: audit            # mandatory audit trail
    use: acme_audit
    enabled: true
    required: true
    table_prefix: acme_
  - name: costs
    use: "{M}:unmarked"
    enabled: false         # re-enable after the migration
    config:
      currency: EUR

title:
    max_chars: 40
"""


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> EntryPointIndex:
    return install_entry_points(
        monkeypatch, {"acme_audit": f"{M}:good", "acme_spare": f"{M}:unmarked", "acme_other": f"{M}:older_patch"}
    )


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    return path


def test_disable_enable_round_trip_changes_only_the_flag(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "extensions", "disable", "audit", "--config", str(config_file))
    assert code == 0 and "disabled audit" in out
    assert config_file.read_text() == COMMENTED.replace("    enabled: true\n", "    enabled: false\n", 1)
    code, _, _ = run(capsys, "extensions", "enable", "costs", "--config", str(config_file))
    assert code == 0
    assert config_file.read_text() == COMMENTED.replace("    enabled: true\n", "    enabled: false\n", 1).replace(
        "    enabled: false         # re-enable", "    enabled: true         # re-enable"
    )
    assert run(capsys, "extensions", "enable", "acme_audit", "--config", str(config_file))[0] == 0  # entry point
    assert run(capsys, "extensions", "disable", f"{M}:unmarked", "--config", str(config_file))[0] == 0  # use value
    assert config_file.read_bytes() == COMMENTED.encode("utf-8")  # byte for byte, comments and all
    assert not list(config_file.parent.glob("*.tmp")), "atomic writes leave no temporary file behind"


def test_enable_an_installed_but_unconfigured_extension_adds_it(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "extensions", "enable", "acme_other", "--config", str(config_file))
    assert code == 0 and "added" in out
    assert load_app_config(config_file).plugins[-1].use == "acme_other"
    assert config_file.read_text().startswith(COMMENTED.split("\ntitle:")[0])


def test_unknown_name_is_an_error(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "extensions", "disable", "nope", "--config", str(config_file))
    assert code == 1 and err.startswith("error: no plugins entry matches 'nope'")


def test_list_shows_installed_and_configured_side_by_side(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "extensions", "list", "--config", str(config_file))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "NAME",
        "USE",
        "ENTRY",
        "POINT",
        "STATUS",
        "REQUIRED",
        "VERSION",
        "DISTRIBUTION",
    ]
    assert lines[1].split()[:5] == ["audit", "acme_audit", "acme_audit", "enabled", "yes"]
    assert lines[2].split()[:5] == ["costs", f"{M}:unmarked", "acme_spare", "disabled", "no"]
    # acme_spare is configured through its value, so only acme_other is listed as unconfigured.
    assert lines[3].split()[:6] == ["-", f"{M}:older_patch", "acme_other", "not", "configured", "-"]
    assert len(lines) == 4


def test_config_errors_exit_1_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins:\n  - name: a\n    use: x\n    enabled: maybe\n")
    for argv in (["extensions", "list"], ["extensions", "disable", "a"]):
        code, _, err = run(capsys, *argv, "--config", str(path))
        assert code == 1
        assert err.startswith(f"error: {path}:4: plugins[0].enabled: Input should be a valid boolean")
        assert "Traceback" not in err


def test_config_path_defaults_to_the_environment(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERFLOW_CONFIG", str(config_file))
    code, out, _ = run(capsys, "extensions", "list")
    assert code == 0 and "audit" in out


# -- doctor ------------------------------------------------------------------------------------
def test_doctor_would_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "plugins:\n"
        "  - {name: audit, use: acme_audit}\n"
        "  - {name: broken, use: extensions.fixtures_broken:install}\n"
        "  - {name: off, use: acme_spare, enabled: false}\n"
    )
    code, out, _ = run(capsys, "extensions", "doctor", "--config", str(path))
    lines = out.splitlines()
    assert code == 0
    assert lines[0].startswith("Extension extensions.fixtures_broken:install: cannot import")
    assert lines[1] == f"Extensions loaded: 1/3 ({M}:good); 1 loaded, 1 disabled, 1 failed"
    assert lines[2].startswith("diagnostic [load] extensions.fixtures_broken:install: cannot import")
    assert lines[-1] == "The Gateway would start."


def test_doctor_required_failure_exits_1(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_file.write_text(COMMENTED.replace("use: acme_audit", "use: missing_ext"))
    code, out, _ = run(capsys, "extensions", "doctor", "--config", str(config_file))
    assert code == 1
    assert "Extension missing_ext: no extension named 'missing_ext'" in out
    assert "ExtensionLoadError: required extension missing_ext failed to install" in out
    assert out.splitlines()[-1] == "The Gateway would not start."


def test_doctor_prefix_collision_exits_1(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_file.write_text(COMMENTED.replace("table_prefix: acme_", "table_prefix: thread"))
    code, out, _ = run(capsys, "extensions", "doctor", "--config", str(config_file))
    assert code == 1 and "TablePrefixCollisionError" in out and "threads" in out


def test_doctor_loads_auth_as_the_gateway_would(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("auth:\n  path: ./auth.py:auth\n")
    code, out, err = run(capsys, "extensions", "doctor", "--config", str(path))
    assert code == 1 and err.startswith(f"error: {path}: auth.path: no file") and "would not start" in out
    (tmp_path / "auth.py").write_text(
        "from langgraph_sdk import Auth\nauth = Auth()\n\n"
        "@auth.authenticate\nasync def who(authorization):\n    return 'u'\n"
    )
    code, out, _ = run(capsys, "extensions", "doctor", "--config", str(path))
    assert code == 0 and out.splitlines()[-1] == "The Gateway would start."


def test_doctor_invalid_config_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins: {not: a list}\n")
    code, out, err = run(capsys, "extensions", "doctor", "--config", str(path))
    assert code == 1 and err.startswith(f"error: {path}:1: plugins:") and "would not start" in out


def test_doctor_refuses_a_config_path_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    absent = tmp_path / "absent.yaml"
    code, out, err = run(capsys, "extensions", "doctor", "--config", str(absent))
    assert code == 1 and err == f"error: {absent}: does not exist (named by --config); create it or fix the path\n"
    assert "would not start" in out


def test_doctor_without_a_config_file_would_start_on_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default ./config.yaml is absent: a first run
    monkeypatch.delenv("DEERFLOW_CONFIG", raising=False)
    code, out, _ = run(capsys, "extensions", "doctor")
    assert code == 0 and "Extensions loaded: 0/0 (none)" in out


# -- serve and run are implemented elsewhere and get their arguments untouched ------------------
def test_serve_and_run_delegate_their_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[str]] = {}

    def serve_command(argv: list[str]) -> int:
        seen["serve"] = argv
        return 0

    def run_command(argv: list[str]) -> int:
        seen["run"] = argv
        return 3

    serve_mod = types.ModuleType("deerflow_ext.gateway.serve")
    serve_mod.serve_command = serve_command  # type: ignore[attr-defined]
    client_mod = types.ModuleType("deerflow_ext.run_console")
    client_mod.run_command = run_command  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "deerflow_ext.gateway.serve", serve_mod)
    monkeypatch.setitem(sys.modules, "deerflow_ext.run_console", client_mod)
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", "9000", "--config", "c.yaml"]) == 0
    assert cli.main(["run", "hello", "--thread", "t1"]) == 3
    assert seen == {
        "serve": ["--host", "0.0.0.0", "--port", "9000", "--config", "c.yaml"],
        "run": ["hello", "--thread", "t1"],
    }


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert all(word in out for word in ("serve", "run", "extensions"))


# -- operator conveniences ------------------------------------------------------------------------
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from deerflow_ext import __version__

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"deerflow-ext {__version__}\n"


def test_list_json_describes_each_entry_and_what_is_installed_but_not_configured(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "extensions", "list", "--json", "--config", str(config_file))
    assert code == 0
    data = json.loads(out)
    audit, costs = data["configured"]
    assert (audit["name"], audit["status"], audit["installed"], audit["table_prefix"]) == (
        "audit",
        "enabled",
        True,
        "acme_",
    )
    assert (costs["name"], costs["status"]) == ("costs", "disabled")
    assert [i["entry_point"] for i in data["installed_not_configured"]] == ["acme_other"]


def test_a_configured_but_uninstalled_entry_is_listed_as_not_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins:\n  - name: gone\n    use: acme_gone\n")
    code, out, _ = run(capsys, "extensions", "list", "--config", str(path))
    assert code == 0
    row = out.splitlines()[1].split()
    assert row == ["gone", "acme_gone", "-", "not", "installed", "no", "not", "installed", "not", "installed"]


def test_enable_and_disable_say_a_restart_is_needed_and_enable_warns_when_not_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins:\n  - name: gone\n    use: acme_gone\n    enabled: false\n    required: true\n")
    code, out, err = run(capsys, "extensions", "enable", "gone", "--config", str(path))
    assert code == 0
    assert out.strip() == "enabled gone; restart the Gateway to apply it (extensions load once, at startup)"
    assert err.startswith("warning: 'acme_gone' is not installed: the Gateway will log it as failed and refuse")
    code, out, err = run(capsys, "extensions", "disable", "gone", "--config", str(path))
    assert code == 0 and "restart the Gateway" in out and err == ""


def test_output_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    import subprocess

    config = tmp_path / "config.yaml"
    config.write_text("plugins: []\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "deerflow_ext.cli", "extensions", "doctor", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before anything is written (`| head -0`)
    err = process.stderr.read()
    assert process.wait(60) == 0
    assert err == ""
