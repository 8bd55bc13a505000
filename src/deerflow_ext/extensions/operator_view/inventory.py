"""Every ``plugins:`` entry as an operator sees it: status, package, contributions, problems.

One description serves ``GET /api/extensions``, ``/health`` and ``extensions list --json``, so
the three never disagree about what "failed" or "not installed" means:

* ``disabled`` — ``enabled: false`` (``installed`` still says whether its package is there);
* ``not installed`` — enabled, but ``use`` names no installed entry point and no importable
  module (found without importing anything: ``importlib.util.find_spec`` of the top module);
* ``loaded`` / ``failed`` — what the Gateway's one load made of an enabled, installed entry
  (the CLI, which loads nothing, says ``enabled`` instead).

Loaded entries are matched to the snapshot *by position*: ``LoadedExtensions.loaded`` lists
attributions in ``plugins:`` order, so two entries with the same ``use`` are told apart.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from deerflow_ext.config.schema import PluginEntry

from ..boundary.diagnostics import Diagnostic
from ..contract.snapshot import CONTRIBUTION_KINDS, LoadedExtensions
from ..plugin_loading.discovery import EntryPointIndex

__all__ = ["EntryReport", "describe_entries", "is_installed", "problems_of"]

_RECENT = 20  # diagnostics shown per entry


@dataclass(frozen=True)
class EntryReport:
    name: str
    use: str
    extension: str  # the attribution every log line uses
    package: str | None  # the record's informational ``package:`` (DeerFlow's record shape)
    enabled: bool
    required: bool
    intercept: bool
    status: str
    installed: bool
    distribution: str | None
    version: str | None
    table_prefix: str | None
    contributions: Mapping[str, int] = field(default_factory=dict)
    diagnostics: tuple[Mapping[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["contributions"] = dict(self.contributions)
        data["diagnostics"] = [dict(d) for d in self.diagnostics]
        return data


def is_installed(use: str, index: EntryPointIndex) -> bool:
    """Whether ``use`` would resolve to something installed, without importing it."""
    if use in index:
        return True
    if ":" not in use:
        return False
    top = use.partition(":")[0].split(".")[0]
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _contributions(extensions: LoadedExtensions, position: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind in CONTRIBUTION_KINDS:
        n = sum(1 for c in getattr(extensions, kind) if c.position == position)
        if n:
            counts[kind] = n
    return counts


def _diagnostic(d: Diagnostic) -> dict[str, Any]:
    return {"phase": d.phase, "message": d.message, "error_type": d.error_type, "at": d.at}


def describe_entries(
    entries: Sequence[PluginEntry],
    index: EntryPointIndex,
    *,
    extensions: LoadedExtensions | None = None,
    diagnostics: Iterable[Diagnostic] = (),
) -> list[EntryReport]:
    """One report per entry, in ``plugins:`` order; ``extensions`` None means nothing was loaded."""
    recent: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        recent.setdefault(diagnostic.extension, []).append(diagnostic)
    loaded = list(extensions.loaded) if extensions is not None else []
    reports: list[EntryReport] = []
    for position, entry in enumerate(entries):
        extension = index.attribution(entry.use)
        installed = is_installed(entry.use, index)
        info = index.describe(entry.use) if installed else None
        contributions: dict[str, int] = {}
        if not entry.enabled:
            status = "disabled"
        elif extensions is None:
            status = "enabled" if installed else "not installed"
        elif loaded and loaded[0] == extension:
            loaded.pop(0)
            status = "loaded"
            contributions = _contributions(extensions, position)
        else:
            status = "failed" if installed else "not installed"
        reports.append(
            EntryReport(
                name=entry.name,
                use=entry.use,
                extension=extension,
                package=entry.package,
                enabled=entry.enabled,
                required=entry.required,
                intercept=entry.intercept,
                status=status,
                installed=installed,
                distribution=info.distribution if info is not None else None,
                version=info.version if info is not None else None,
                table_prefix=entry.table_prefix,
                contributions=contributions,
                diagnostics=tuple(_diagnostic(d) for d in recent.get(extension, [])[-_RECENT:]),
            )
        )
    return reports


def problems_of(reports: Iterable[EntryReport]) -> list[str]:
    """Why the deployment is degraded: an enabled entry that did not load."""
    return [
        f"extension {r.name} ({r.extension}) {r.status}"
        for r in reports
        if r.enabled and r.status in ("failed", "not installed")
    ]
