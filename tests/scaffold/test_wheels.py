"""``deerflow-ext wheels DIR`` and the host source ``extensions new`` records.

The wheels are built from this checkout by pip and installed by pip into a fresh virtualenv
with no index: what an extension author's machine does with them, once the checkout is
gone from the picture.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from deerflow_ext import cli
from deerflow_ext.distribution import host_source
from deerflow_ext.distribution.source import parse_direct_url
from deerflow_ext.scaffold import create_package

ROOT = Path(__file__).resolve().parents[2]


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode()


def _version(metadata: str) -> str:
    return next(line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Version: "))


def test_the_wheels_pin_the_contract_by_version_and_install_with_no_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = tmp_path / "wheels"
    assert cli.main(["wheels", str(wheels), "--source", str(ROOT)]) == 0
    out = capsys.readouterr().out
    host, contract = sorted(wheels.glob("*.whl"))
    assert host.name.startswith("deerflow_ext-") and contract.name.startswith("deerflow_extension_api-")
    assert out.splitlines() == [
        f"built {host}",
        f"built {contract}",
        f"next: python3 -m pip install --find-links {wheels} {host}",
    ]
    requires = [
        line for line in _metadata(host).splitlines() if line.startswith("Requires-Dist: deerflow-extension-api")
    ]
    assert requires == [f"Requires-Dist: deerflow-extension-api=={_version(_metadata(contract))}"]

    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), "--no-deps"]
    done = subprocess.run([*install, str(host), "deerflow-extension-api"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    probe = (
        "import importlib.metadata as m, json;"
        "d = m.distribution('deerflow-ext');"
        "print(json.dumps([d.read_text('direct_url.json'), m.requires('deerflow-ext'), d.version]))"
    )
    recorded, requirements, version = json.loads(
        subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout
    )
    assert not [r for r in requirements if str(ROOT) in r or " @ " in r], requirements
    # What `extensions new` would record on that machine: the wheel, beside its contract.
    source = parse_direct_url(recorded, version)
    assert (source.kind, Path(source.location)) == ("wheel", host)


def test_a_directory_that_is_not_a_checkout_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["wheels", str(tmp_path / "w"), "--source", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: {tmp_path} is not a deerflow-ext checkout (no pyproject.toml and contract/pyproject.toml); "
        "name one with --source PATH\n"
    )


@pytest.mark.parametrize(
    ("record", "kind", "location"),
    [
        (None, "index", ""),
        ({"url": "file:///src/deer%20flow", "dir_info": {"editable": True}}, "checkout", "/src/deer flow"),
        (
            {"url": "file:///w/deerflow_ext-1-py3-none-any.whl", "archive_info": {}},
            "wheel",
            "/w/deerflow_ext-1-py3-none-any.whl",
        ),
        (
            {"url": "https://github.com/o/deerflow-ext", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            "vcs",
            "git+https://github.com/o/deerflow-ext@abc123",
        ),
    ],
    ids=["index", "checkout", "wheel", "vcs"],
)
def test_pips_record_of_the_install_is_read_as_the_host_source(record: object, kind: str, location: str) -> None:
    source = parse_direct_url(json.dumps(record) if record is not None else None, "9.9.9")
    assert (source.kind, source.location) == (kind, location)
    assert source.requirement == (location or "deerflow-ext==9.9.9")
    assert (
        source.install_arguments("test")
        == {
            "index": "'deerflow-ext[test]'",
            "checkout": "'/src/deer flow[test]'",
            "wheel": "--find-links /w '/w/deerflow_ext-1-py3-none-any.whl[test]'",
            "vcs": "'deerflow-ext[test] @ git+https://github.com/o/deerflow-ext@abc123'",
        }[kind]
    )


def test_a_generated_package_records_where_its_host_was_installed_from(tmp_path: Path) -> None:
    target = create_package("acme_hello", tmp_path)
    project = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["deerflow-ext"]["host"] == host_source().location
    assert host_source().kind in {"checkout", "wheel", "vcs"}, "this suite runs on an installed host"


def test_the_wheels_command_is_listed_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "wheels" in capsys.readouterr().out
