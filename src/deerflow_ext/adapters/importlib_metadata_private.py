"""``importlib_metadata``'s distribution path (``PathDistribution._path``).

``extensions install`` must tell a reinstall at the same version apart (pip writes a new
``.dist-info``), so it marks each distribution with its metadata directory's inode and
mtime. The directory is only reachable through the private ``_path`` of a
``PathDistribution``.

Fallback: without it the marker is the version alone, so a same-version reinstall is not
reported as a change (the install still happens; only the report is coarser).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["metadata_directory"]


def metadata_directory(dist: object) -> Path | None:
    """The ``.dist-info``/``.egg-info`` directory of ``dist``, or ``None`` when unknown."""
    path = getattr(dist, "_path", None)
    return path if isinstance(path, Path) else None
