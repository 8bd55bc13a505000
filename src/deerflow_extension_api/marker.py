"""The ``@extension`` marker and the shape of an install function.

The marker records which contract version an install function was written against.
It is a safety net for ``--no-deps`` installs and editable checkouts; the package's
``deerflow-extension-api`` dependency range remains the primary compatibility check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeVar

from .registry import ExtensionRegistry

__all__ = ["ExtensionInstall", "extension"]

ExtensionInstall: TypeAlias = Callable[[ExtensionRegistry, Mapping[str, Any]], None]
"""``install(registry, config)``: registers contributions; ``config`` is a shallow copy."""

F = TypeVar("F", bound=Callable[..., Any])


def extension(*, api: str, name: str | None = None) -> Callable[[F], F]:
    """Stamp an install function with the contract version it targets.

    Sets ``__deerflow_api__`` to *api* and ``__deerflow_name__`` to *name* (``None``
    when not given) and returns the function unchanged. Any version string is stamped as
    given (``"0.2"`` and ``"0.2.1"`` alike, as DeerFlow's marker takes them): judging it
    is the host's version gate, which compares what it can parse and refuses the rest
    with one line naming the extension. Only a non-string raises, here, at import.
    """
    if not isinstance(api, str):
        raise TypeError(f"extension(api=...) takes a version string such as '0.2', got {type(api).__name__}")

    def mark(install: F) -> F:
        install.__deerflow_api__ = api  # type: ignore[attr-defined]
        install.__deerflow_name__ = name  # type: ignore[attr-defined]
        return install

    return mark
