"""``plugins:`` records in DeerFlow's shape (``package:``, no ``name:``) load and are managed unchanged.

DeerFlow's extension manager writes records such as::

    - package: deerflow-extension-example
      use: deerflow_extension_example:install
      enabled: true
      required: false
      config: {}

An operator moving such a ``config.yaml`` over must not have to edit it: it validates, the
Gateway's loader loads it, ``doctor`` judges it, ``list`` shows its package, and
``enable``/``disable`` find it by its use, its package or the name derived from its use.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.cli_helpers import install_entry_points, run
from deerflow_ext import cli
from deerflow_ext.config.loading import ConfigError, load_app_config
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
from deerflow_ext.extensions.plugin_loading.loader import load_extensions

M = "extensions.fixtures_plugins"

DEERFLOW_SHAPED = f"""\
# written by DeerFlow's extension manager
plugins:
  - package: acme-audit
    use: {M}:good
    enabled: true
    required: false
    config: {{}}
  - name: spare
    package: Acme_Spare
    use: acme_spare
    enabled: false
    intercept: true
"""


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> EntryPointIndex:
    return install_entry_points(monkeypatch, {"acme_spare": f"{M}:unmarked"})


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(DEERFLOW_SHAPED, encoding="utf-8")
    return path


def test_the_record_validates_with_its_name_derived_from_use(config_file: Path) -> None:
    first, second = load_app_config(config_file).plugins
    assert (first.name, first.use, first.package, first.intercept) == (f"{M}:good", f"{M}:good", "acme-audit", False)
    assert (second.name, second.package, second.enabled, second.intercept) == ("spare", "Acme_Spare", False, True)


def test_the_loader_loads_it_and_carries_intercept(config_file: Path, installed: EntryPointIndex) -> None:
    config = load_app_config(config_file)
    enabled = config.model_copy(update={"plugins": [p.model_copy(update={"enabled": True}) for p in config.plugins]})
    extensions = load_extensions(enabled, entry_points=installed, diagnostics=DiagnosticsList())
    assert extensions.summary == f"Extensions loaded: 2/2 ({M}:good, {M}:unmarked)"
    assert extensions.loaded == (f"{M}:good", f"{M}:unmarked")


def test_two_unnamed_records_of_one_use_are_told_apart_by_their_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid in DeerFlow, valid here: the second unnamed record of a use is ``<use>#2``."""
    path = tmp_path / "config.yaml"
    text = f"plugins:\n  - use: {M}:good\n    enabled: true\n  - use: {M}:good\n    enabled: true\n"
    path.write_text(text, encoding="utf-8")
    assert [p.name for p in load_app_config(path).plugins] == [f"{M}:good", f"{M}:good#2"]
    code, out, _ = run(capsys, "extensions", "disable", f"{M}:good#2", "--config", str(path))
    assert code == 0, out
    assert [p.enabled for p in load_app_config(path).plugins] == [True, False]
    code, out, _ = run(capsys, "extensions", "disable", f"{M}:good", "--config", str(path))
    assert code == 0, out
    assert [p.enabled for p in load_app_config(path).plugins] == [False, False]


def test_a_name_given_twice_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"plugins:\n  - use: {M}:good\n  - {{name: {M}:good, use: {M}:good}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="give each record its own name"):
        load_app_config(path)


@pytest.mark.parametrize("designation", [f"{M}:good", "acme-audit", "ACME_audit"])
def test_disable_and_enable_find_an_unnamed_record(
    config_file: Path, capsys: pytest.CaptureFixture[str], designation: str
) -> None:
    code, out, _ = run(capsys, "extensions", "disable", designation, "--config", str(config_file))
    assert code == 0, out
    assert config_file.read_text() == DEERFLOW_SHAPED.replace("    enabled: true\n", "    enabled: false\n", 1)
    assert run(capsys, "extensions", "enable", designation, "--config", str(config_file))[0] == 0
    assert config_file.read_bytes() == DEERFLOW_SHAPED.encode("utf-8")


def test_a_package_designates_a_named_record_too(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "extensions", "enable", "acme-spare", "--config", str(config_file))
    assert code == 0 and "enabled acme-spare" in out
    assert load_app_config(config_file).plugins[1].enabled is True


def test_doctor_judges_it(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "extensions", "doctor", "--config", str(config_file))
    assert code == 0
    assert f"Extensions loaded: 1/2 ({M}:good); 1 loaded, 1 disabled" in out.splitlines()
    assert out.splitlines()[-1] == "The Gateway would start."


def test_list_shows_the_records_package(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "extensions", "list", "--config", str(config_file))
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:]]
    # Nothing installed provides these entries here, so the record's package is what is known.
    assert rows[0][0] == f"{M}:good" and rows[0][-1] == "acme-audit"
    assert rows[1][0] == "spare" and rows[1][-1] == "Acme_Spare"


def test_a_records_package_beside_a_disagreeing_installed_distribution() -> None:
    assert cli._distribution_cell("acme-audit", "acme_audit") == "acme-audit"
    assert cli._distribution_cell("acme-audit", None) == "acme-audit"
    assert cli._distribution_cell(None, "acme-audit") == "acme-audit"
    assert cli._distribution_cell("acme-audit", "other") == "acme-audit (config: other)"
