"""``extensions install`` / ``extensions remove``: pip and ``config.yaml`` as one transaction.

An operator who installs an extension wants two things to happen together — the package in
the environment and its ``plugins:`` record in ``config.yaml`` — or neither: a package
installed but unconfigured is invisible clutter, and a record without its package stops a
Gateway whose entry is ``required``. So install runs three steps (pip install, find the one
entry point, add the record) and undoes the earlier ones when a later one fails.

What pip changed is learned by diffing the installed distributions before and after, not by
parsing pip's output: the diff also catches dependencies pip pulled in, and it is what must
be undone. Distributions are read in *this* process (``importlib_metadata``), which is the
interpreter pip installs into (``sys.executable -m pip``), so "installed" means "importable
by the Gateway started with this interpreter".

Remove goes the other way round — record first, then the package — so a Gateway restarted
half-way never looks for an extension that is gone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import importlib_metadata

from deerflow_ext.adapters.importlib_metadata_private import metadata_directory
from deerflow_ext.config.editing import (
    ConfigEditError,
    add_plugin,
    find_plugin,
    remove_plugin,
    set_plugin_enabled,
)
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.config.schema import PluginEntry

from .discovery import ENTRY_POINT_GROUP, EntryPointIndex

__all__ = [
    "DistributionChange",
    "InstallError",
    "InstallResult",
    "PipRunner",
    "Removal",
    "RemovalResult",
    "diff_distributions",
    "install_extension",
    "plan_removal",
    "remove_extension",
    "run_pip",
    "snapshot_distributions",
]

STEPS = ("pip install", "find entry point", "add plugins record")
HOST_DISTRIBUTION = "deerflow-ext"

PipRunner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


# -- pip ------------------------------------------------------------------------------------
def run_pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run pip of *this* interpreter: the environment the Gateway imports extensions from."""
    return subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )


def _pip_failure(result: subprocess.CompletedProcess[str]) -> str:
    # pip's last error lines name the cause (no such file, no matching version); the rest is noise.
    lines = [line.strip() for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
    told = [line for line in lines if line.startswith(("ERROR:", "Hint:", "error:", "hint:"))]
    tail = " | ".join(told or lines[-3:]) or "no output"
    return f"pip exited with status {result.returncode}: {tail}"


# -- what pip changed -----------------------------------------------------------------------
@dataclass(frozen=True)
class InstalledDistribution:
    """One distribution as found on ``sys.path``; ``marker`` tells a reinstall from no change."""

    name: str
    version: str
    marker: str


@dataclass(frozen=True)
class DistributionChange:
    """A distribution pip added (``before is None``) or replaced (upgrade, downgrade, reinstall)."""

    before: InstalledDistribution | None
    after: InstalledDistribution

    @property
    def name(self) -> str:
        return self.after.name

    def describe(self) -> str:
        if self.before is None:
            return f"{self.name} {self.after.version}"
        return f"{self.name} {self.before.version} -> {self.after.version}"


def canonical(name: str) -> str:
    """PEP 503 normalisation: ``Acme_Probe`` and ``acme-probe`` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _marker(dist: object) -> str:
    # A reinstall at the same version writes a new .dist-info; its inode/mtime tell it apart.
    path = metadata_directory(dist)
    if path is None:
        return ""
    try:
        st = os.stat(path)
    except OSError:
        return str(path)
    return f"{path}:{st.st_ino}:{st.st_mtime_ns}"


def snapshot_distributions() -> dict[str, InstalledDistribution]:
    """The importable distribution of each name (the first on ``sys.path``, as import sees it)."""
    importlib_metadata.MetadataPathFinder.invalidate_caches()
    found: dict[str, InstalledDistribution] = {}
    for dist in importlib_metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:  # a broken .dist-info must not hide the others
            continue
        if not name:
            continue
        key = canonical(name)
        if key not in found:
            found[key] = InstalledDistribution(key, dist.version, _marker(dist))
    return found


def diff_distributions(
    before: Mapping[str, InstalledDistribution], after: Mapping[str, InstalledDistribution]
) -> list[DistributionChange]:
    """Distributions new or replaced in ``after`` (removed ones are pip's business: it replaced them)."""
    return [DistributionChange(before.get(key), dist) for key, dist in sorted(after.items()) if before.get(key) != dist]


def _entry_points_of(name: str) -> list[importlib_metadata.EntryPoint]:
    try:
        dist = importlib_metadata.distribution(name)
    except importlib_metadata.PackageNotFoundError:
        return []
    return sorted(dist.entry_points.select(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


# -- install --------------------------------------------------------------------------------
class InstallError(Exception):
    """A step failed; ``rollback`` says what was undone, ``restored`` whether all of it was."""

    def __init__(self, step: int, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.message = message
        self.rollback: list[str] = []
        self.restored = True

    def __str__(self) -> str:
        return f"step {self.step}/{len(STEPS)} ({STEPS[self.step - 1]}): {self.message}"


@dataclass(frozen=True)
class InstallResult:
    """What install did: the distributions pip changed and the record it added."""

    entry: PluginEntry
    distribution: str
    version: str
    changes: tuple[DistributionChange, ...] = field(default=())
    existing: bool = False
    """The record was already in config.yaml (as after ``cp config.example.yaml``) and was enabled."""


def preflight(config_path: Path, name: str | None) -> None:
    """Refuse before pip runs when the config could not take the record anyway.

    Raises ``ConfigError`` for an invalid file (the Gateway would not start either) and
    ``ConfigEditError`` for a ``--name`` already configured; nothing is installed then.
    """
    config = load_app_config(config_path)
    if name is not None and any(entry.name == name for entry in config.plugins):
        raise ConfigEditError(f"a plugins entry named {name!r} already exists in {config_path}; nothing was installed")


def install_extension(
    source: str, config_path: Path, *, name: str | None = None, pip: PipRunner = run_pip
) -> InstallResult:
    """pip-install ``source`` and add its one extension to ``config_path``, or change nothing.

    Raises :class:`InstallError` naming the failed step, after undoing the earlier ones.
    """
    preflight(config_path, name)
    before = snapshot_distributions()
    step = 1
    try:
        result = pip(["install", source])
        if result.returncode != 0:
            # pip undoes its own partial work; whatever it did commit is undone below all the same.
            raise InstallError(1, _pip_failure(result))
        step = 2
        changes = _changes_since(before)
        change, entry_point = _find_entry_point(source, changes)
        # ``package:`` records where the entry came from, in DeerFlow's record shape, so
        # ``extensions list`` can show it next to what is installed later.
        entry = PluginEntry(
            name=name or entry_point.name, use=entry_point.name, package=change.name, enabled=True, required=False
        )
        step = 3
        configured = _configured_entry(config_path, entry_point, name)
        if configured is not None:
            set_plugin_enabled(config_path, configured.name, True)
            entry = configured.model_copy(update={"enabled": True})
        else:
            add_plugin(config_path, entry)
    except InstallError as exc:
        raise _rolled_back(exc, _changes_since(before), pip) from None
    except KeyboardInterrupt:
        raise _rolled_back(InstallError(step, "interrupted"), _changes_since(before), pip) from None
    except Exception as exc:  # an invalid --name, a config write that failed: still undone
        detail = str(exc) if isinstance(exc, ConfigEditError) else f"{type(exc).__name__}: {exc}"
        raise _rolled_back(InstallError(step, detail), _changes_since(before), pip) from exc
    return InstallResult(entry, change.name, change.after.version, tuple(changes), existing=configured is not None)


def _configured_entry(
    config_path: Path, entry_point: importlib_metadata.EntryPoint, name: str | None
) -> PluginEntry | None:
    """The one record already naming this entry point (by its name or its value), if any.

    ``config.example.yaml`` ships a record per example, disabled; installing the example
    then means enabling that record, not adding a second one under the same name.
    """
    uses = {entry_point.name, entry_point.value}
    matches = [
        entry
        for entry in load_app_config(config_path).plugins
        if entry.use in uses and (name is None or entry.name == name)
    ]
    return matches[0] if len(matches) == 1 else None


def _changes_since(before: Mapping[str, InstalledDistribution]) -> list[DistributionChange]:
    return diff_distributions(before, snapshot_distributions())


def _find_entry_point(
    source: str, changes: Sequence[DistributionChange]
) -> tuple[DistributionChange, importlib_metadata.EntryPoint]:
    """The one ``deerflow.extensions`` entry point among what pip just changed."""
    if not changes:
        raise InstallError(
            2,
            f"pip installed nothing new for {source!r} (already installed?); "
            "configure an installed extension with `deerflow-ext extensions enable NAME`",
        )
    found = [(change, ep) for change in changes for ep in _entry_points_of(change.name)]
    if len(found) != 1:
        installed = ", ".join(change.describe() for change in changes)
        declared = ", ".join(f"{ep.name} = {ep.value} ({change.name})" for change, ep in found) or "none"
        raise InstallError(
            2,
            f"expected exactly one {ENTRY_POINT_GROUP} entry point in what was installed ({installed}), "
            f"found {len(found)}: {declared}",
        )
    change, entry_point = found[0]
    shadow = EntryPointIndex.scan().get(entry_point.name)
    if shadow is not None and shadow.distribution and canonical(shadow.distribution) != change.name:
        raise InstallError(
            2,
            f"entry point {entry_point.name!r} is also declared by {shadow.distribution}, which is found first; "
            f"the Gateway would load {shadow.value} instead of {entry_point.value}",
        )
    return change, entry_point


def _rolled_back(error: InstallError, changes: Sequence[DistributionChange], pip: PipRunner) -> InstallError:
    """Undo ``changes`` and record on ``error`` what was undone and what could not be."""
    added = [change for change in changes if change.before is None]
    replaced = [change for change in changes if change.before is not None]
    if added:
        result = pip(["uninstall", "-y", *(change.name for change in added)])
        names = ", ".join(change.describe() for change in added)
        if result.returncode == 0:
            error.rollback.append(f"uninstalled {names}")
        else:
            error.restored = False
            error.rollback.append(f"could not uninstall {names}: {_pip_failure(result)}")
    for change in replaced:
        _restore_previous(change, error, pip)
    return error


def _restore_previous(change: DistributionChange, error: InstallError, pip: PipRunner) -> None:
    before = change.before
    assert before is not None
    if before.version == change.after.version:
        error.restored = False
        error.rollback.append(
            f"{change.name} {before.version} was reinstalled from the new source; its previous files cannot be "
            "restored (reinstall it from where it came from)"
        )
        return
    result = pip(["install", "--no-deps", f"{change.name}=={before.version}"])
    if result.returncode == 0:
        error.rollback.append(f"reinstalled {change.name} {before.version} (was upgraded to {change.after.version})")
        return
    error.restored = False
    error.rollback.append(
        f"could not reinstall {change.name} {before.version}; the environment now has {change.after.version} "
        f"({_pip_failure(result)})"
    )


# -- remove ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Removal:
    """What ``remove NAME`` will do, known before asking the operator."""

    entry: PluginEntry
    distribution: str | None
    version: str | None
    kept_for: tuple[str, ...]

    def kept_reason(self) -> str | None:
        """Why the distribution stays installed, or ``None`` when it goes with the record."""
        if self.distribution is None:
            return "no installed distribution provides it: nothing to uninstall"
        if _is_host(self.distribution):
            return f"keep {self.distribution}: it is the host itself"
        if self.kept_for:
            return f"keep {self.distribution}: still used by {', '.join(self.kept_for)}"
        return None

    def describe(self) -> str:
        then = self.kept_reason() or f"then uninstall {self.distribution} {self.version or ''}".rstrip()
        return f"remove plugins entry {self.entry.name!r} (use: {self.entry.use}); {then}"


@dataclass(frozen=True)
class RemovalResult:
    removal: Removal
    uninstalled: bool


def _is_host(distribution: str) -> bool:
    return canonical(distribution) == HOST_DISTRIBUTION


def _distribution_of(use: str, index: EntryPointIndex) -> tuple[str | None, str | None]:
    info = index.describe(use)
    if info is None or info.distribution is None:
        return None, None
    return canonical(info.distribution), info.version


def plan_removal(config_path: Path, name: str, index: EntryPointIndex) -> Removal:
    """Which record ``name`` designates and whether its distribution may go with it."""
    plugins = list(load_app_config(config_path).plugins)
    position = find_plugin([entry.model_dump() for entry in plugins], name, index)
    entry = plugins[position]
    distribution, version = _distribution_of(entry.use, index)
    kept_for = _other_users(plugins, position, distribution, index)
    return Removal(entry, distribution, version, kept_for)


def _other_users(
    plugins: Iterable[PluginEntry], skip: int, distribution: str | None, index: EntryPointIndex
) -> tuple[str, ...]:
    if distribution is None:
        return ()
    return tuple(
        entry.name
        for i, entry in enumerate(plugins)
        if i != skip and _distribution_of(entry.use, index)[0] == distribution
    )


def remove_extension(
    config_path: Path, removal: Removal, index: EntryPointIndex, *, pip: PipRunner = run_pip
) -> RemovalResult:
    """Delete the record (under the config lock), then uninstall if no other entry uses the package.

    The "other users" check is repeated on the config as it is *after* the edit, because
    another operator may have added an entry using the same distribution since the plan.
    Raises ``RuntimeError`` when pip fails; the record is gone by then and stays gone.
    """
    remove_plugin(config_path, removal.entry.name, entry_points=index)
    if removal.distribution is None or _is_host(removal.distribution):
        return RemovalResult(removal, False)
    remaining = list(load_app_config(config_path).plugins)
    kept_for = _other_users(remaining, -1, removal.distribution, index)
    if kept_for:
        return RemovalResult(Removal(removal.entry, removal.distribution, removal.version, kept_for), False)
    result = pip(["uninstall", "-y", removal.distribution])
    if result.returncode != 0:
        raise RuntimeError(
            f"removed plugins entry {removal.entry.name!r}, but uninstalling {removal.distribution} failed: "
            f"{_pip_failure(result)}"
        )
    return RemovalResult(removal, True)
