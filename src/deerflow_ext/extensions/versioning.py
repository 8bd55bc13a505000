"""The version gate: an extension's ``@extension(api=...)`` marker against the host's API.

The marker is a safety net for ``--no-deps`` installs and editable checkouts; the extension
package's own ``deerflow-extension-api`` dependency range is the primary mechanism. A
missing marker therefore skips the check rather than failing it.

Rules (spec, "Version check"): before 1.0 an extension needs the host's major and minor and
a patch no newer than the host's; from 1.0 it needs the host's major and a (minor, patch) no
newer than the host's. A refusal names the range to install::

    extension requires extension-api 0.2.2, host provides 0.2.1. Install a matching
    version: pip install 'deerflow-extension-api>=0.2.2,<0.3'

The distribution in that command is the one that actually provides the
``deerflow_extension_api`` import package in this environment (from installed metadata), so
the advice works whether the contract ships alone or inside the ``deerflow-ext`` wheel; when
no metadata names a provider (a source checkout on ``PYTHONPATH``) it is the contract's own
distribution name, ``deerflow-extension-api``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import importlib_metadata

from deerflow_extension_api import API_VERSION

__all__ = [
    "API_DISTRIBUTION",
    "API_IMPORT_PACKAGE",
    "ApiVersion",
    "ApiVersionError",
    "api_distribution_name",
    "check_marker",
    "is_compatible",
    "pip_range",
    "refusal_message",
]

API_IMPORT_PACKAGE = "deerflow_extension_api"
API_DISTRIBUTION = "deerflow-extension-api"

_VERSION = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)")


class ApiVersionError(Exception):
    """The extension's marker refuses this host (or cannot be read); the install is skipped."""


@dataclass(frozen=True, order=True)
class ApiVersion:
    """``MAJOR.MINOR.PATCH`` of the extension API, exactly as ``@extension(api=...)`` demands.

    Only release numbers are accepted: the contract is never published with pre-release or
    local suffixes, so a marker carrying one (or set by hand to ``"0.2"``) is refused loudly
    rather than guessed at.
    """

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: object) -> ApiVersion:
        if not isinstance(text, str):
            raise ApiVersionError(
                f"extension declares extension-api {text!r}, which is not a version string "
                "(expected MAJOR.MINOR.PATCH, e.g. '0.2.1')"
            )
        match = _VERSION.fullmatch(text)
        if match is None:
            raise ApiVersionError(
                f"extension declares extension-api {text!r}, which is not a version "
                "(expected MAJOR.MINOR.PATCH, e.g. '0.2.1')"
            )
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), int(patch))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def is_compatible(required: ApiVersion, host: ApiVersion) -> bool:
    """Whether a host at ``host`` can run an extension built against ``required``."""
    if required.major != host.major:
        return False
    if host.major == 0:
        return required.minor == host.minor and required.patch <= host.patch
    return (required.minor, required.patch) <= (host.minor, host.patch)


def pip_range(required: ApiVersion) -> str:
    """The release line ``required`` belongs to: ``>=0.2.2,<0.3`` or ``>=1.4.0,<2``."""
    upper = f"{required.major}.{required.minor + 1}" if required.major == 0 else f"{required.major + 1}"
    return f">={required},<{upper}"


@functools.cache
def api_distribution_name() -> str:
    """The installed distribution providing ``deerflow_extension_api`` (else the contract's name)."""
    try:
        providers = importlib_metadata.packages_distributions().get(API_IMPORT_PACKAGE) or []
    except Exception:
        providers = []
    return providers[0] if providers else API_DISTRIBUTION


def refusal_message(required: ApiVersion, host: ApiVersion, distribution: str | None = None) -> str:
    dist = distribution or api_distribution_name()
    return (
        f"extension requires extension-api {required}, host provides {host}. "
        f"Install a matching version: pip install '{dist}{pip_range(required)}'"
    )


def check_marker(install: Any, *, host_version: str = API_VERSION, distribution: str | None = None) -> None:
    """Spec step 2.4: raise :class:`ApiVersionError` unless ``install``'s marker admits this host.

    ``distribution`` overrides the name in the pip advice (tests, and hosts that vendor the
    contract under another name).
    """
    marker = getattr(install, "__deerflow_api__", None)
    if marker is None:
        return
    required = ApiVersion.parse(marker)
    host = ApiVersion.parse(host_version)
    if not is_compatible(required, host):
        raise ApiVersionError(refusal_message(required, host, distribution))
