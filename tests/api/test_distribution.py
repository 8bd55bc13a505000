"""The contract is its own distribution, and the host's ships none of its files.

Read from what pip installed (``importlib.metadata``) and from the two ``pyproject.toml``
files, so a packaging change that would make two distributions own one file, give the
contract a dependency, or let the host resolve a contract other than its own tree fails here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import tomllib
import typing
from pathlib import Path

import deerflow_extension_api
from deerflow_extension_api import API_VERSION, ExtensionInstall, ExtensionRegistry

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "deerflow_extension_api"
CONTRACT = "deerflow-extension-api"


def _pyproject(path: Path) -> dict[str, typing.Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _files(distribution: str) -> set[str]:
    files = importlib.metadata.distribution(distribution).files or []
    return {str(f) for f in files if "__pycache__" not in f.parts}


def test_the_contract_project_is_stdlib_only_at_the_contracts_version() -> None:
    project = _pyproject(ROOT / "contract" / "pyproject.toml")["project"]
    assert project["name"] == CONTRACT
    assert project["version"] == API_VERSION == "0.2.6"
    assert project["dependencies"] == []


def test_the_installed_contract_is_this_version_with_no_requirements() -> None:
    assert importlib.metadata.version(CONTRACT) == API_VERSION
    assert importlib.metadata.requires(CONTRACT) in (None, [])


def test_the_host_pins_the_contract_exactly_and_builds_it_from_its_own_tree() -> None:
    """DeerFlow's rule (the host pins the contract it implements exactly; a range would let pip
    pick a newer one), plus where to build it from (contract/README.md): two requirements
    that pip must meet with one candidate."""
    pyproject = _pyproject(ROOT / "pyproject.toml")
    contract = [d for d in pyproject["project"]["dependencies"] if d.startswith(CONTRACT)]
    assert contract == [f"{CONTRACT}=={API_VERSION}", f"{CONTRACT} @ {{root:uri}}/contract"]
    assert pyproject["tool"]["hatch"]["metadata"]["allow-direct-references"] is True
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/deerflow_ext"]
    installed = sorted(
        r.replace(" ", "") for r in importlib.metadata.requires("deerflow-ext") or [] if r.startswith(CONTRACT)
    )
    assert installed[0] == f"{CONTRACT}=={API_VERSION}"
    assert installed[1].startswith(f"{CONTRACT}@file://") and installed[1].endswith("/contract"), installed


def test_no_file_is_owned_by_both_distributions() -> None:
    host, contract = _files("deerflow-ext"), _files(CONTRACT)
    assert not host & contract
    assert not [f for f in host if f.startswith("deerflow_extension_api/")]
    assert "deerflow_extension_api/py.typed" in contract


def test_the_installed_contract_is_this_working_tree() -> None:
    """pip rebuilds the contract on every ``pip install -e .``; a stale copy (the tree was edited
    since) would make subprocess tests run another contract than the in-process ones."""
    distribution = importlib.metadata.distribution(CONTRACT)
    installed = {
        Path(str(f)).name: Path(str(distribution.locate_file(f))).read_text(encoding="utf-8")
        for f in distribution.files or []
        if str(f).startswith("deerflow_extension_api/") and str(f).endswith(".py")
    }
    here = {p.name: p.read_text(encoding="utf-8") for p in SRC.glob("*.py")}
    stale = sorted(name for name in here.keys() | installed.keys() if here.get(name) != installed.get(name))
    assert not stale, f"the installed {CONTRACT} differs from src/ in {stale}: run pip install -e '.[test]' again"


def test_py_typed_ships_as_a_package_resource() -> None:
    assert importlib.resources.files("deerflow_extension_api").joinpath("py.typed").is_file()


def test_install_functions_are_typed_against_the_public_registry() -> None:
    assert {"ExtensionRegistry", "ExtensionInstall"} <= set(deerflow_extension_api.__all__)
    parameters, returned = typing.get_args(ExtensionInstall)
    assert parameters[0] is ExtensionRegistry
    assert returned is None
