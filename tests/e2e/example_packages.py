"""The example packages under ``plugins_examples/`` and how a test session installs them for real."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "plugins_examples"
PACKAGES = {
    "observers": ("deerflow-observers", "deerflow_observers:install"),
    "audit": ("deerflow-audit", "deerflow_audit:install"),
    "costs": ("deerflow-costs", "deerflow_costs:install"),
    "otel": ("deerflow-otel", "deerflow_otel:install"),
}


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def install_examples() -> Iterator[dict[str, str]]:
    """pip-install every example package into this environment; yield their entry points.

    ``--no-deps --no-build-isolation`` keeps it offline when the build backend is already
    here (the packages' only dependency, deerflow-ext, is the environment itself).
    Packages installed here are uninstalled afterwards; ones that were already present are
    reinstalled from the working tree and left in place.
    """
    offline = importlib.util.find_spec("hatchling") is not None
    flags = ["--no-deps", "--no-build-isolation"] if offline else ["--no-deps"]
    fresh: list[str] = []
    for name, (distribution, _) in PACKAGES.items():
        if not _installed(distribution):
            fresh.append(distribution)
        done = pip("install", "--quiet", *flags, str(EXAMPLES / name))
        assert done.returncode == 0, f"pip install {name} failed:\n{done.stdout}\n{done.stderr}"
    importlib.invalidate_caches()
    groups = importlib.metadata.entry_points(group="deerflow.extensions")
    found = {ep.name: ep.value for ep in groups if ep.name in PACKAGES}
    assert found == {name: use for name, (_, use) in PACKAGES.items()}
    yield found
    if fresh:
        pip("uninstall", "--yes", "--quiet", *fresh)


@contextlib.contextmanager
def installed_example(package: Path, distribution: str, entry: str, use: str) -> Iterator[list[str]]:
    """``package`` pip-installed with its dependencies for the block (offline when hatchling is
    here), its ``entry`` checked to be ``use``; yields its requirements. Uninstalled after,
    unless it was installed before."""
    try:
        importlib.metadata.distribution(distribution)
        fresh = False
    except importlib.metadata.PackageNotFoundError:
        fresh = True
    offline = ["--no-build-isolation"] if importlib.util.find_spec("hatchling") is not None else []
    done = pip("install", "--quiet", *offline, str(package))
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    importlib.invalidate_caches()
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="deerflow.extensions")}
    assert found.get(entry) == use
    try:
        yield [r.replace(" ", "") for r in importlib.metadata.requires(distribution) or []]
    finally:
        if fresh:
            pip("uninstall", "--yes", "--quiet", distribution)
