"""``extensions install`` / ``remove`` for real: pip into a throwaway venv, never the dev one.

Packages are built on the fly, offline: wheels are zipped directly, and the one "local
path" source uses a tiny in-tree PEP 517 backend (the dev environment has no build backend
a test may reach an index for). The CLI runs with the temp venv's python, so its
``sys.executable -m pip`` installs there and its metadata diff sees exactly that venv.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import deerflow_ext
from deerflow_ext.config.editing import add_plugin
from deerflow_ext.config.loading import load_app_config

EXISTING = """\
# production gateway -- do not reformat
plugins:
  - name: audit            # mandatory audit trail
    use: "extensions.fixtures_plugins:good"
    required: true

title:
    max_chars: 40   # short titles
"""

BACKEND = '''
"""Minimal PEP 517 backend: one pure-Python wheel with entry points, nothing else."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _wheel import build


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return build(wheel_directory)


def get_requires_for_build_wheel(config_settings=None):
    return []
'''


@dataclass(frozen=True)
class Package:
    """A throwaway extension distribution: one module and its ``deerflow.extensions`` entry points."""

    dist: str
    version: str
    entry_points: Sequence[str]
    requires: Sequence[str] = ()

    @property
    def module(self) -> str:
        return self.dist.replace("-", "_")

    def files(self) -> dict[str, bytes]:
        info = f"{self.module}-{self.version}.dist-info"
        eps = "".join(f"{name} = {self.module}:install\n" for name in self.entry_points)
        files = {
            f"{self.module}/__init__.py": b"def install(registry, config):\n    return None\n",
            f"{info}/METADATA": (
                f"Metadata-Version: 2.1\nName: {self.dist}\nVersion: {self.version}\n"
                + "".join(f"Requires-Dist: {r}\n" for r in self.requires)
            ).encode(),
            f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            f"{info}/entry_points.txt": f"[deerflow.extensions]\n{eps}".encode(),
        }
        record = [f"{n},sha256={_digest(d)},{len(d)}" for n, d in files.items()] + [f"{info}/RECORD,,"]
        files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
        return files

    def wheel(self, directory: Path) -> Path:
        path = directory / f"{self.module}-{self.version}-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in self.files().items():
                zf.writestr(name, data)
        return path

    def project(self, directory: Path) -> Path:
        """A source tree pip builds through PEP 517 (the backend zips the same files)."""
        root = directory / self.dist
        root.mkdir()
        (root / "_backend.py").write_text(BACKEND)
        (root / "_wheel.py").write_text(
            "import base64, hashlib, os, zipfile\n"
            f"FILES = {self.files()!r}\n"
            f"NAME = {self.wheel_name!r}\n"
            "def build(directory):\n"
            "    with zipfile.ZipFile(os.path.join(directory, NAME), 'w') as zf:\n"
            "        for name, data in FILES.items():\n"
            "            zf.writestr(name, data)\n"
            "    return NAME\n"
        )
        (root / "pyproject.toml").write_text(
            textwrap.dedent(
                f"""\
                [build-system]
                requires = []
                build-backend = "_backend"
                backend-path = ["."]

                [project]
                name = "{self.dist}"
                version = "{self.version}"
                """
            )
        )
        return root

    @property
    def wheel_name(self) -> str:
        return f"{self.module}-{self.version}-py3-none-any.whl"


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class Venv:
    python: Path
    site: Path
    env: dict[str, str]

    def cli(self, *argv: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None) -> Result:
        proc = subprocess.run(
            [str(self.python), "-m", "deerflow_ext.cli", "extensions", *argv],
            input=stdin if stdin is not None else None,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            cwd=cwd,
            timeout=60,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def installed(self, dist: str) -> list[str]:
        """Versions of ``dist`` present in the venv's own site-packages."""
        module = dist.replace("-", "_")
        return sorted(
            p.name.removeprefix(f"{module}-").removesuffix(".dist-info")
            for p in self.site.glob(f"{module}-*.dist-info")
        )


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """One venv for the module: pip and the dev packages come from /work/venv via a .pth, first."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)], check=True)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dev_site = sysconfig.get_paths()["purelib"]
    src = Path(deerflow_ext.__file__).resolve().parents[1]
    tests = Path(__file__).resolve().parents[1]
    (Path(site) / "_deerflow_dev.pth").write_text(
        f"import sys; sys.path[:0] = [p for p in ({str(src)!r}, {dev_site!r}, {str(tests)!r}) if p not in sys.path]\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV", "DEERFLOW_CONFIG")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1")
    return Venv(python, Path(site), env)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(EXISTING, encoding="utf-8")
    return path


def _inserted_lines(before: str, after: str) -> list[str]:
    """Lines ``after`` adds to ``before``; fails if anything of ``before`` was altered."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    assert all(tag in ("equal", "insert") for tag, *_ in ops), after
    return [line for tag, _, _, j1, j2 in ops if tag == "insert" for line in new[j1:j2]]


# -- install ----------------------------------------------------------------------------------
def test_install_local_path_adds_one_record_and_keeps_the_rest_byte_for_byte(
    venv: Venv, config: Path, tmp_path: Path
) -> None:
    source = Package("acme-one", "1.0", ["acme_one"]).project(tmp_path)
    result = venv.cli("install", str(source), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 0, result.err
    assert "installed acme-one 1.0" in result.out
    added = _inserted_lines(EXISTING, config.read_text(encoding="utf-8"))
    lines = [line.strip() for line in added]
    assert lines == ["- name: acme_one", "use: acme_one", "package: acme-one", "enabled: true"]
    plugins = load_app_config(config).plugins
    assert [(p.name, p.use, p.package, p.enabled, p.required) for p in plugins][1:] == [
        ("acme_one", "acme_one", "acme-one", True, False)
    ]
    assert venv.installed("acme-one") == ["1.0"]


def test_install_wheel_creates_a_missing_config_with_the_given_name(venv: Venv, tmp_path: Path) -> None:
    wheel = Package("acme-named", "0.3", ["acme_named"]).wheel(tmp_path)
    config = tmp_path / "fresh" / "config.yaml"
    config.parent.mkdir()

    result = venv.cli("install", str(wheel), "-y", "--name", "ledger", "--config", str(config), cwd=tmp_path)

    assert result.code == 0, result.err
    plugins = load_app_config(config).plugins
    assert [(p.name, p.use, p.package, p.enabled, p.required) for p in plugins] == [
        ("ledger", "acme_named", "acme-named", True, False)
    ]
    assert config.read_text(encoding="utf-8").startswith("plugins:\n")


def test_two_entry_points_are_refused_and_rolled_back(venv: Venv, config: Path, tmp_path: Path) -> None:
    wheel = Package("acme-two", "1.0", ["acme_a", "acme_b"]).wheel(tmp_path)

    result = venv.cli("install", str(wheel), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 1
    assert "error: step 2/3 (find entry point): expected exactly one deerflow.extensions entry point" in result.err
    assert "found 2: acme_a = acme_two:install (acme-two), acme_b = acme_two:install (acme-two)" in result.err
    assert "rollback: uninstalled acme-two 1.0" in result.err
    assert venv.installed("acme-two") == []
    assert config.read_text(encoding="utf-8") == EXISTING


def test_failing_pip_names_the_step_and_leaves_config_unchanged(venv: Venv, config: Path, tmp_path: Path) -> None:
    result = venv.cli("install", str(tmp_path / "no-such-package"), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 1
    assert "error: step 1/3 (pip install): pip exited with status" in result.err
    assert config.read_text(encoding="utf-8") == EXISTING


def test_entry_name_already_configured_fails_step_3_and_uninstalls(venv: Venv, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    original = "plugins:\n  - name: acme_dup  # taken\n    use: extensions.fixtures_plugins:good\n"
    config.write_text(original, encoding="utf-8")
    wheel = Package("acme-dup", "1.0", ["acme_dup"]).wheel(tmp_path)

    result = venv.cli("install", str(wheel), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 1
    assert "error: step 3/3 (add plugins record): a plugins entry named 'acme_dup' already exists" in result.err
    assert "rollback: uninstalled acme-dup 1.0" in result.err
    assert venv.installed("acme-dup") == []
    assert config.read_text(encoding="utf-8") == original

    # --name that is already taken is refused before pip runs at all.
    again = venv.cli("install", str(wheel), "--yes", "--name", "acme_dup", "--config", str(config), cwd=tmp_path)
    assert again.code == 1 and "nothing was installed" in again.err
    assert venv.installed("acme-dup") == []


def test_installing_an_extension_whose_entry_is_already_configured_enables_that_entry(
    venv: Venv, tmp_path: Path
) -> None:
    # As after `cp config.example.yaml config.yaml`: the example's record is there, disabled.
    config = tmp_path / "config.yaml"
    original = "plugins:\n  # the example\n  - name: example\n    use: acme_example\n    enabled: false\n"
    config.write_text(original, encoding="utf-8")
    wheel = Package("acme-example", "1.0", ["acme_example"]).wheel(tmp_path)

    result = venv.cli("install", str(wheel), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 0, result.err
    assert "enabled the existing plugins entry 'example' (use: acme_example)" in result.out
    assert config.read_text(encoding="utf-8") == original.replace("enabled: false", "enabled: true")
    assert venv.installed("acme-example") == ["1.0"]
    assert not (tmp_path / "config.yaml.lock").exists(), "the edit lock is removed again"


def test_refused_upgrade_reinstalls_the_previous_version(venv: Venv, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    v1 = Package("acme-up", "1.0", ["acme_up"]).wheel(wheels)
    v2 = Package("acme-up", "2.0", ["acme_up", "acme_up_extra"]).wheel(wheels)
    config = tmp_path / "config.yaml"
    assert venv.cli("install", str(v1), "--yes", "--config", str(config), cwd=tmp_path).code == 0
    before = config.read_text(encoding="utf-8")

    # Reinstalling 1.0 needs somewhere to find it: here a find-links directory, as an index would be.
    result = venv.cli(
        "install", str(v2), "--yes", "--config", str(config), cwd=tmp_path, env={"PIP_FIND_LINKS": str(wheels)}
    )

    assert result.code == 1
    assert "step 2/3 (find entry point)" in result.err
    assert "rollback: reinstalled acme-up 1.0 (was upgraded to 2.0)" in result.err
    assert venv.installed("acme-up") == ["1.0"]
    assert config.read_text(encoding="utf-8") == before


def test_no_tty_without_yes_refuses_and_installs_nothing(venv: Venv, tmp_path: Path) -> None:
    wheel = Package("acme-tty", "1.0", ["acme_tty"]).wheel(tmp_path)
    config = tmp_path / "config.yaml"

    result = venv.cli("install", str(wheel), "--config", str(config), cwd=tmp_path)

    assert result.code == 1
    assert "stdin is not a terminal" in result.err and "--yes" in result.err
    assert venv.installed("acme-tty") == []
    assert not config.exists()


# -- remove -----------------------------------------------------------------------------------
def test_remove_deletes_the_record_then_uninstalls(venv: Venv, config: Path, tmp_path: Path) -> None:
    wheel = Package("acme-gone", "1.0", ["acme_gone"]).wheel(tmp_path)
    assert venv.cli("install", str(wheel), "--yes", "--name", "gone", "--config", str(config), cwd=tmp_path).code == 0
    assert venv.installed("acme-gone") == ["1.0"]

    refused = venv.cli("remove", "gone", "--config", str(config), cwd=tmp_path)
    assert refused.code == 1 and "stdin is not a terminal" in refused.err

    result = venv.cli("remove", "gone", "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        f"removed plugins entry 'gone' from {config}; "
        "restart the Gateway to apply it (extensions load once, at startup)",
        "uninstalled acme-gone",
    ]
    assert config.read_text(encoding="utf-8") == EXISTING
    assert venv.installed("acme-gone") == []


def test_remove_keeps_a_distribution_another_entry_still_uses(venv: Venv, config: Path, tmp_path: Path) -> None:
    wheel = Package("acme-shared", "1.0", ["acme_shared"]).wheel(tmp_path)
    assert venv.cli("install", str(wheel), "--yes", "--config", str(config), cwd=tmp_path).code == 0
    add_plugin(config, {"name": "second", "use": "acme_shared"})

    result = venv.cli("remove", "second", "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 0, result.err
    assert "keep acme-shared: still used by acme_shared" in result.out
    assert venv.installed("acme-shared") == ["1.0"]


def test_a_package_pinning_the_contract_resolves_it_from_the_local_build(venv: Venv, tmp_path: Path) -> None:
    """Offline (``PIP_NO_INDEX``): the pin is met by the contract installed with the host, the
    deerflow-extension-api distribution built from this tree; pip installs nothing else."""
    wheel = Package("acme-pinned", "1.0", ["acme_pinned"], requires=["deerflow-extension-api>=0.2,<0.3"]).wheel(
        tmp_path
    )
    config = tmp_path / "config.yaml"
    result = venv.cli("install", str(wheel), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 0, result.err
    assert "installed acme-pinned 1.0" in result.out
    assert venv.installed("acme-pinned") == ["1.0"]
    assert venv.installed("deerflow-extension-api") == []  # not reinstalled into the venv: already met


def test_a_package_needing_another_contract_line_is_refused_and_nothing_changes(venv: Venv, tmp_path: Path) -> None:
    wheel = Package("acme-future", "1.0", ["acme_future"], requires=["deerflow-extension-api>=0.3,<0.4"]).wheel(
        tmp_path
    )
    config = tmp_path / "config.yaml"
    result = venv.cli("install", str(wheel), "--yes", "--config", str(config), cwd=tmp_path)

    assert result.code == 1
    assert "deerflow-extension-api" in result.err
    assert venv.installed("acme-future") == []
    assert not config.exists()
