"""Real entry points: pip-install a throwaway extension package and load it by name.

The package is built by pip through PEP 517 with a tiny in-tree backend (``backend-path``),
because the dev environment has setuptools without ``wheel`` and no hatchling, and a test
must not reach for an index. What matters is real: pip writes a ``.dist-info`` with
``entry_points.txt`` into a fresh venv, and the host finds it with one importlib-metadata
scan, by the entry-point name an operator writes in ``config.yaml``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import deerflow_ext

BACKEND = '''
"""Minimal PEP 517 backend: enough to build one pure-Python wheel with entry points."""
import base64, hashlib, os, zipfile

NAME, VERSION, PKG = "acme_probe", "1.2.3", "acme_probe"
DIST = "acme-probe"
METADATA = f"Metadata-Version: 2.1\\nName: {DIST}\\nVersion: {VERSION}\\n"
ENTRY_POINTS = "[deerflow.extensions]\\nacme_probe = acme_probe:install\\n"
WHEEL = "Wheel-Version: 1.0\\nGenerator: test-backend\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = f"{NAME}-{VERSION}-py3-none-any.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    files = {}
    for fn in sorted(os.listdir(PKG)):
        if fn.endswith(".py"):
            with open(os.path.join(PKG, fn), "rb") as fh:
                files[f"{PKG}/{fn}"] = fh.read()
    files[f"{info}/METADATA"] = METADATA.encode()
    files[f"{info}/WHEEL"] = WHEEL.encode()
    files[f"{info}/entry_points.txt"] = ENTRY_POINTS.encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\\n".join(record) + "\\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []
'''

PACKAGE = """
from deerflow_extension_api import extension


class Probe:
    def on_agent_assembled(self, app_store, descriptor):
        return None


@extension(api="0.2.1", name="acme_probe")
def install(registry, config):
    registry.agent_assembly_observer(Probe())
"""

SCRIPT = """
import logging, sys
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
from deerflow_ext.extensions.plugin_loading.loader import load_extensions

logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
index = EntryPointIndex.scan()
ext = load_extensions(load_app_config(sys.argv[1]), entry_points=index)
probe = index.get("acme_probe")
print("DIST", probe.distribution, probe.version)
print("OBSERVERS", len(ext.assembly_observers), ext.assembly_observers[0].extension)
"""


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def test_installed_package_loads_by_entry_point_name(tmp_path: Path) -> None:
    pkg = tmp_path / "acme-probe"
    (pkg / "acme_probe").mkdir(parents=True)
    (pkg / "acme_probe" / "__init__.py").write_text(PACKAGE)
    (pkg / "_backend.py").write_text(BACKEND)
    (pkg / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [build-system]
            requires = []
            build-backend = "_backend"
            backend-path = ["."]

            [project]
            name = "acme-probe"
            version = "1.2.3"

            [project.entry-points."deerflow.extensions"]
            acme_probe = "acme_probe:install"
            """
        )
    )

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = _venv_python(venv)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dev environment (pip, pydantic, ...) and the source tree go *first* on the new venv's
    # path, ahead of the base interpreter's own site-packages that --system-site-packages adds.
    dev_site = sysconfig.get_paths()["purelib"]
    src = Path(deerflow_ext.__file__).resolve().parents[1]
    (Path(site) / "_deerflow_dev.pth").write_text(
        f"import sys; sys.path[:0] = [p for p in ({str(src)!r}, {dev_site!r}) if p not in sys.path]\n"
    )

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INDEX"] = "1"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", str(pkg)],
        check=True,
        env=env,
        timeout=90,
    )
    assert list(Path(site).glob("acme_probe-1.2.3.dist-info/entry_points.txt"))

    (tmp_path / "config.yaml").write_text("plugins:\n  - name: probe\n    use: acme_probe\n    config: {}\n")
    (tmp_path / "load.py").write_text(SCRIPT)
    result = subprocess.run(
        [str(python), str(tmp_path / "load.py"), str(tmp_path / "config.yaml")],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    lines = result.stdout.splitlines()
    assert "Extensions loaded: 1/1 (acme_probe:install)" in lines, result.stdout + result.stderr
    assert "DIST acme-probe 1.2.3" in lines
    assert "OBSERVERS 1 acme_probe:install" in lines

    # The CLI sees the same installation: list shows the distribution, doctor would start.
    listing = subprocess.run(
        [
            str(python),
            "-m",
            "deerflow_ext.cli",
            "extensions",
            "list",
            "--config",
            str(tmp_path / "config.yaml"),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    ).stdout
    assert listing.splitlines()[1].split() == [
        "probe",
        "acme_probe",
        "acme_probe",
        "enabled",
        "no",
        "1.2.3",
        "acme-probe",
    ]
