"""Timestamps read back from the host database, always aware and in UTC.

Every time the host stores is UTC, but SQLite hands back the naive text it stored while
PostgreSQL's ``timestamptz`` comes back aware: one function gives every reader the same
kind of value, so comparisons with ``datetime.now(UTC)`` never mix the two.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["stored_utc"]


def stored_utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC time; ``None`` stays ``None``."""
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
