"""The ``@extension`` marker and the shape of an install function.

The marker records which contract version an install function was written against.
It is a safety net for ``--no-deps`` installs and editable checkouts; the package's
``deerflow-extension-api`` dependency range remains the primary compatibility check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeVar

from .registry import ExtensionRegistry

__all__ = ["ExtensionInstall", "extension"]

ExtensionInstall: TypeAlias = Callable[[ExtensionRegistry, Mapping[str, Any]], None]
"""``install(registry, config)``: registers contributions; ``config`` is a shallow copy."""

F = TypeVar("F", bound=Callable[..., Any])

_VERSION = re.compile(r"\d+\.\d+\.\d+")


def extension(*, api: str, name: str | None = None) -> Callable[[F], F]:
    """Stamp an install function with the contract version it targets.

    Sets ``__deerflow_api__`` to *api* and ``__deerflow_name__`` to *name* (``None``
    when not given) and returns the function unchanged. *api* must be
    ``MAJOR.MINOR.PATCH``; a malformed version raises ``ValueError`` at import, where
    the author sees it, rather than being refused later by the host's version check.
    """
    if not isinstance(api, str) or _VERSION.fullmatch(api) is None:
        raise ValueError(f"extension(api=...) must be 'MAJOR.MINOR.PATCH', got {api!r}")

    def mark(install: F) -> F:
        install.__deerflow_api__ = api  # type: ignore[attr-defined]
        install.__deerflow_name__ = name  # type: ignore[attr-defined]
        return install

    return mark
