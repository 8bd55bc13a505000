"""langsmith's runtime overrides: reading the one installed before ours.

``langsmith.set_runtime_overrides(aio_to_thread=...)`` is public; reading back what is
installed is not: ``langsmith._runtime_overrides.get_runtime_overrides().aio_to_thread``.
The host needs the previous override so its own (``agents/tracing.py``) can defer to it
when a call is traced, instead of replacing it.

Fallback: without the private reader the host installs nothing (langsmith keeps its
default thread hop for every call; only speed is lost), since replacing an override it
cannot see could undo someone else's.
"""

from __future__ import annotations

from typing import Any

__all__ = ["UNREADABLE", "installed_aio_to_thread"]

UNREADABLE: Any = object()
"""What :func:`installed_aio_to_thread` answers when this langsmith does not let us read it."""


def installed_aio_to_thread() -> Any:
    """The ``aio_to_thread`` override installed now (``None``: langsmith's default), or
    :data:`UNREADABLE`."""
    try:
        from langsmith._runtime_overrides import get_runtime_overrides
    except ImportError:
        return UNREADABLE
    return getattr(get_runtime_overrides(), "aio_to_thread", UNREADABLE)
