"""The source the running ``deerflow-ext`` was installed from, as pip recorded it.

pip writes ``direct_url.json`` (PEP 610) into the metadata of a distribution installed from
a URL or a path: a local directory (a checkout, editable or not), an archive (a wheel), or
a VCS URL at a commit. Installed from an index there is none. That record is the one
truthful answer to "which host is this?", so ``extensions new`` writes it into the package
it generates, and the package's noxfile installs the same host.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from importlib import metadata
from pathlib import PurePath
from typing import Literal
from urllib.parse import unquote, urlparse

__all__ = ["HOST_DISTRIBUTION", "HostSource", "host_source", "parse_direct_url"]

HOST_DISTRIBUTION = "deerflow-ext"

SourceKind = Literal["checkout", "wheel", "vcs", "index"]


@dataclass(frozen=True)
class HostSource:
    """``kind`` and ``location``: a directory or wheel path, a ``git+URL@commit``, or "" (an index)."""

    kind: SourceKind
    location: str
    version: str

    def install_arguments(self, extra: str) -> str:
        """``pip install`` arguments for this host with ``extra``, as a shell line: from the
        same source, so a host from a checkout or a wheel is never looked up on an index
        that does not have it."""
        if self.kind == "checkout":
            return shlex.quote(f"{self.location}[{extra}]")
        if self.kind == "wheel" and "://" not in self.location:
            beside = shlex.quote(str(PurePath(self.location).parent))
            return f"--find-links {beside} {shlex.quote(f'{self.location}[{extra}]')}"
        if self.kind == "vcs":
            return shlex.quote(f"{HOST_DISTRIBUTION}[{extra}] @ {self.location}")
        return shlex.quote(f"{HOST_DISTRIBUTION}[{extra}]")

    @property
    def requirement(self) -> str:
        """What pip is given to install this host again (a path, a VCS URL, or name==version)."""
        return self.location if self.location else f"{HOST_DISTRIBUTION}=={self.version}"


def _path(url: str) -> str:
    return unquote(urlparse(url).path)


def parse_direct_url(text: str | None, version: str) -> HostSource:
    """A :class:`HostSource` from the text of ``direct_url.json`` (None: installed from an index)."""
    if not text:
        return HostSource("index", "", version)
    record = json.loads(text)
    url = str(record.get("url", ""))
    if "vcs_info" in record:
        info = record["vcs_info"]
        commit = info.get("commit_id") or info.get("requested_revision") or ""
        subdirectory = record.get("subdirectory")
        location = f"{info.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
        return HostSource("vcs", location + (f"#subdirectory={subdirectory}" if subdirectory else ""), version)
    if url.startswith("file:"):
        kind: SourceKind = "checkout" if "dir_info" in record else "wheel"
        return HostSource(kind, _path(url), version)
    return HostSource("wheel", url, version)  # an archive fetched from a URL


def host_source() -> HostSource:
    """Where the running host was installed from (pip's record of it)."""
    distribution = metadata.distribution(HOST_DISTRIBUTION)
    return parse_direct_url(distribution.read_text("direct_url.json"), distribution.version)
