"""The install/remove transaction in-process, with pip replaced: ordering, rollback bookkeeping, prompts.

The real-pip tests (``test_install_remove``) show the happy paths and common failures end to
end; these pin what is awkward to provoke with a real pip: a config write that fails after
the install, an uninstall that fails during rollback, the record being gone *before* pip
uninstalls, and the terminal prompt.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from deerflow_ext import cli
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.extensions.plugin_loading import install as inst
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex, InstalledExtension
from deerflow_ext.extensions.plugin_loading.install import InstalledDistribution, InstallError

M = "extensions.fixtures_plugins"
OLD = InstalledDistribution("acme-x", "1.0", "old")
NEW = InstalledDistribution("acme-x", "2.0", "new")


class FakePip:
    """Records pip calls; ``fail`` names the sub-commands that exit 1."""

    def __init__(self, *fail: str) -> None:
        self.calls: list[list[str]] = []
        self.fail = set(fail)

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(args))
        code = 1 if args[0] in self.fail else 0
        return subprocess.CompletedProcess(["pip", *args], code, "", "ERROR: boom\n" if code else "")


def _snapshots(monkeypatch: pytest.MonkeyPatch, before: dict, after: dict) -> None:
    states: Iterator[dict] = iter([before, *([after] * 10)])
    monkeypatch.setattr(inst, "snapshot_distributions", lambda: next(states))


def _entry_points(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> None:
    import importlib_metadata

    eps = [importlib_metadata.EntryPoint(n, f"{M}:good", "deerflow.extensions") for n in names]
    monkeypatch.setattr(inst, "_entry_points_of", lambda dist: eps)
    monkeypatch.setattr(EntryPointIndex, "scan", classmethod(lambda cls, group="": EntryPointIndex(eps)))


def test_config_write_failure_is_step_3_and_uninstalls_what_was_added(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _snapshots(monkeypatch, {}, {"acme-x": NEW})
    _entry_points(monkeypatch, ["acme_x"])

    def broken(path: Path, record: object) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(inst, "add_plugin", broken)
    pip = FakePip()

    with pytest.raises(InstallError) as caught:
        inst.install_extension("acme-x", tmp_path / "config.yaml", pip=pip)

    assert str(caught.value) == "step 3/3 (add plugins record): PermissionError: read-only file system"
    assert caught.value.rollback == ["uninstalled acme-x 2.0"] and caught.value.restored
    assert pip.calls == [["install", "acme-x"], ["uninstall", "-y", "acme-x"]]
    assert not (tmp_path / "config.yaml").exists()


def test_nothing_new_installed_is_step_2_with_nothing_to_undo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _snapshots(monkeypatch, {"acme-x": OLD}, {"acme-x": OLD})
    pip = FakePip()

    with pytest.raises(InstallError) as caught:
        inst.install_extension("acme-x", tmp_path / "config.yaml", pip=pip)

    assert str(caught.value).startswith("step 2/3 (find entry point): pip installed nothing new for 'acme-x'")
    assert caught.value.rollback == [] and pip.calls == [["install", "acme-x"]]


def test_unrestorable_upgrade_is_said_plainly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _snapshots(monkeypatch, {"acme-x": OLD}, {"acme-x": NEW})
    _entry_points(monkeypatch, [])
    calls: list[list[str]] = []

    def failing_reinstall(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(args))
        code = 1 if args[:2] == ["install", "--no-deps"] else 0
        return subprocess.CompletedProcess(args, code, "", "ERROR: No matching distribution found\n")

    with pytest.raises(InstallError) as caught:
        inst.install_extension("acme-x", tmp_path / "config.yaml", pip=failing_reinstall)

    assert "found 0: none" in str(caught.value)
    assert not caught.value.restored
    assert caught.value.rollback == [
        "could not reinstall acme-x 1.0; the environment now has 2.0 "
        "(pip exited with status 1: ERROR: No matching distribution found)"
    ]
    assert calls == [["install", "acme-x"], ["install", "--no-deps", "acme-x==1.0"]]


def test_failed_uninstall_during_rollback_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _snapshots(monkeypatch, {}, {"acme-x": NEW})
    _entry_points(monkeypatch, ["a", "b"])
    pip = FakePip("uninstall")

    with pytest.raises(InstallError) as caught:
        inst.install_extension("acme-x", tmp_path / "config.yaml", pip=pip)

    assert not caught.value.restored
    assert caught.value.rollback[0].startswith("could not uninstall acme-x 2.0: pip exited with status 1")


def test_remove_deletes_the_record_before_pip_uninstalls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  - name: x  # ours\n    use: acme_x\n", encoding="utf-8")
    index = EntryPointIndex([InstalledExtension("acme_x", f"{M}:good", "Acme_X", "2.0")])
    seen: list[list[str]] = []

    def pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        seen.append([entry.name for entry in load_app_config(config).plugins])
        return subprocess.CompletedProcess(args, 0, "", "")

    removal = inst.plan_removal(config, "x", index)
    assert removal.describe() == "remove plugins entry 'x' (use: acme_x); then uninstall acme-x 2.0"
    result = inst.remove_extension(config, removal, index, pip=pip)

    assert result.uninstalled and seen == [[]]


def test_terminal_prompt_no_aborts_and_yes_proceeds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    called: list[str] = []

    def fake_install(source: str, path: Path, *, name: str | None = None) -> inst.InstallResult:
        called.append(source)
        raise InstallError(1, "stop here")

    monkeypatch.setattr(inst, "install_extension", fake_install)
    config = str(tmp_path / "config.yaml")

    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    assert cli.main(["extensions", "install", "pkg", "--config", config]) == 1
    assert called == []

    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    assert cli.main(["extensions", "install", "pkg", "--config", config]) == 1
    assert called == ["pkg"]
