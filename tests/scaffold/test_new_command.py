"""deerflow-ext extensions new: a package that declares, pins, installs and tests itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deerflow_ext import __version__, cli
from deerflow_ext.scaffold import NOXFILE, create_package
from deerflow_extension_api import API_VERSION

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_NOXFILE = ROOT / "src" / "deerflow_ext" / "scaffold" / "template" / NOXFILE


def test_the_package_declares_its_entry_point_and_pins_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["extensions", "new", "acme-audit", "--directory", str(tmp_path)]) == 0
    target = tmp_path / "acme-audit"
    assert capsys.readouterr().out == (
        f"created {target} (entry point acme_audit = acme_audit:install)\n"
        f"next: cd {target} && python3 -m pip install nox && python3 -m nox\n"
    )
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "noxfile.py",
        "pyproject.toml",
        "src/acme_audit/__init__.py",
        "src/acme_audit/counts.py",
        "tests/test_acme_audit.py",
    ]
    assert not [f for f in files if "${" in (target / f).read_text(encoding="utf-8")]
    project = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == "acme-audit"
    assert project["project"]["entry-points"]["deerflow.extensions"] == {"acme_audit": "acme_audit:install"}
    major, minor, *_ = __version__.split(".")
    assert f"deerflow-extension-api>={major}.{minor},<{major}.{int(minor) + 1}" in project["project"]["dependencies"]
    assert not [d for d in project["project"]["dependencies"] if d.startswith("deerflow-ext>")]
    assert f'@extension(api="{API_VERSION}", name="acme_audit")' in (target / "src/acme_audit/__init__.py").read_text()
    assert (target / NOXFILE).read_bytes() == TEMPLATE_NOXFILE.read_bytes()


@pytest.mark.parametrize("name", ["Acme", "1acme", "acme audit", "acme__x", "acme-"])
def test_a_name_that_cannot_be_an_entry_point_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["extensions", "new", name, "--directory", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {name!r} is not a usable extension name") and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


def test_existing_work_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "notes.txt").write_text("mine")
    assert cli.main(["extensions", "new", "acme", "--directory", str(tmp_path)]) == 1
    assert "already exists and is not empty" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "acme").iterdir()] == ["notes.txt"]


def test_every_example_shares_the_generated_noxfile() -> None:
    examples = sorted((ROOT / "plugins_examples").iterdir())
    assert [e.name for e in examples] == ["audit", "costs", "fullstack", "observers", "otel", "tally"]
    for example in examples:
        assert (example / NOXFILE).read_bytes() == TEMPLATE_NOXFILE.read_bytes(), example.name


def test_the_generated_tests_pass_against_this_host(tmp_path: Path) -> None:
    # The nox session `scaffold` builds and installs the package in a fresh virtualenv (CI);
    # here its tests run from the source tree against the host under test, in seconds.
    target = create_package("acme_counts", tmp_path)
    env = {**os.environ, "PYTHONPATH": str(target / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def test_a_full_stack_package_pins_the_plugin_contract_and_ships_its_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["extensions", "new", "--full-stack", "acme-notes", "--directory", str(tmp_path)]) == 0
    target = tmp_path / "acme-notes"
    assert capsys.readouterr().out.startswith(f"created {target} (entry point acme_notes = acme_notes:install)\n")
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "noxfile.py",
        "pyproject.toml",
        "src/acme_notes/__init__.py",
        "src/acme_notes/static/page.mjs",
        "src/acme_notes/static/ui_manifest.json",
        "tests/test_acme_notes.py",
    ]
    assert not [f for f in files if "${" in (target / f).read_text(encoding="utf-8")]
    project = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))
    major, minor, *_ = __version__.split(".")
    assert project["project"]["dependencies"] == [f"deerflow-extension-api>={API_VERSION},<{major}.{int(minor) + 1}"]
    assert project["project"]["entry-points"]["deerflow.extensions"] == {"acme_notes": "acme_notes:install"}
    source = (target / "src/acme_notes/__init__.py").read_text(encoding="utf-8")
    assert f'@extension(api="{API_VERSION}", name="acme_notes")' in source
    assert 'NAMESPACE = "acme-notes"' in source and 'MODULE = "acme-notes.v1"' in source
    assert 'module: "acme-notes.v1"' in (target / "src/acme_notes/static/page.mjs").read_text(encoding="utf-8")
    assert (target / NOXFILE).read_bytes() == TEMPLATE_NOXFILE.read_bytes()


def test_the_generated_full_stack_tests_pass_against_this_host(tmp_path: Path) -> None:
    # The plugin's tool called by the agent, its action over HTTP, its page served, its switch.
    target = create_package("acme_hello", tmp_path, full_stack=True)
    # This tree's host and kit, not whichever deerflow-ext the environment has installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target / "src"), str(ROOT / "src")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=target,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout
