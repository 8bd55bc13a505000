"""The version gate: an extension's ``@extension(api=...)`` marker against the host's API.

The marker is a safety net for ``--no-deps`` installs and editable checkouts; the extension
package's own ``deerflow-extension-api`` dependency range is the primary mechanism. A
missing marker therefore skips the check rather than failing it.

Rules (spec, "Version check"): before 1.0 an extension needs the host's major and minor and
a patch no newer than the host's; from 1.0 it needs the host's major and a (minor, patch) no
newer than the host's. A refusal names the range to install::

    extension requires extension-api 0.2.2, host provides 0.2.1. Install a matching
    version: pip install 'deerflow-extension-api>=0.2.2,<0.3'

Markers are read as DeerFlow writes them: any dotted run of numbers (``"0.2"`` is
``0.2.0``; missing parts are zero, extra parts compare too), so an extension written for
DeerFlow passes or fails here exactly as it does there. The refusal shows the marker as the
extension wrote it. A marker that is not such a string (``"v0.2.1"``, ``"0.2.1rc1"``, a
number) cannot be compared and is refused with one line saying so.

The advice always names the contract's own distribution, ``deerflow-extension-api``: the
contract ships as that distribution alone (``contract/pyproject.toml``), never inside the
``deerflow-ext`` wheel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from deerflow_extension_api import API_VERSION

__all__ = [
    "API_DISTRIBUTION",
    "API_IMPORT_PACKAGE",
    "ApiVersion",
    "ApiVersionError",
    "check_marker",
    "is_compatible",
    "pip_range",
    "refusal_message",
]

API_IMPORT_PACKAGE = "deerflow_extension_api"
API_DISTRIBUTION = "deerflow-extension-api"

# ASCII digits only: ``str.isdigit`` would let "0.٢.1" through, which int() then reads as 2.
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")


class ApiVersionError(Exception):
    """The extension's marker refuses this host (or cannot be read); the install is skipped."""


@dataclass(frozen=True)
class ApiVersion:
    """A contract version as a marker states it: its numbers, and the text it was written as.

    ``parts`` has at least three numbers (``"0.2"`` is ``(0, 2, 0)``); comparisons use
    ``parts``, messages use ``text``.
    """

    parts: tuple[int, ...]
    text: str

    @classmethod
    def parse(cls, text: object) -> ApiVersion:
        if not isinstance(text, str):
            raise ApiVersionError(
                f"extension declares extension-api {text!r}, which is not a version string "
                "(expected dotted numbers such as '0.2' or '0.2.1')"
            )
        # A str subclass could run extension code in __str__/__format__ while we build the
        # message; read it as a plain str once, here.
        plain = str.__str__(text)
        if _VERSION.fullmatch(plain) is None:
            raise ApiVersionError(
                f"extension declares extension-api {plain!r}, which is not a version "
                "(expected dotted numbers such as '0.2' or '0.2.1')"
            )
        numbers = tuple(int(part) for part in plain.split("."))
        return cls(numbers + (0,) * (3 - len(numbers)), plain)

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1]

    def __str__(self) -> str:
        return self.text


def is_compatible(required: ApiVersion, host: ApiVersion) -> bool:
    """Whether a host at ``host`` can run an extension built against ``required``."""
    if required.major != host.major:
        return False
    if host.major == 0 and required.minor != host.minor:
        return False
    width = max(len(required.parts), len(host.parts))
    return required.parts + (0,) * (width - len(required.parts)) <= host.parts + (0,) * (width - len(host.parts))


def pip_range(required: ApiVersion) -> str:
    """The release line ``required`` belongs to: ``>=0.2.2,<0.3`` or ``>=1.4.0,<2``."""
    upper = f"{required.major}.{required.minor + 1}" if required.major == 0 else f"{required.major + 1}"
    return f">={required},<{upper}"


def refusal_message(required: ApiVersion, host: ApiVersion) -> str:
    return (
        f"extension requires extension-api {required}, host provides {host}. "
        f"Install a matching version: pip install '{API_DISTRIBUTION}{pip_range(required)}'"
    )


def check_marker(install: Any, *, host_version: str = API_VERSION) -> None:
    """Spec step 2.4: raise :class:`ApiVersionError` unless ``install``'s marker admits this host."""
    marker = getattr(install, "__deerflow_api__", None)
    if marker is None:
        return
    required = ApiVersion.parse(marker)
    host = ApiVersion.parse(host_version)
    if not is_compatible(required, host):
        raise ApiVersionError(refusal_message(required, host))
