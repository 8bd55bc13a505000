"""This package's own alembic chain, run programmatically.

There is no ``alembic.ini``: an installed extension has no working directory of its
own, so the :class:`~alembic.config.Config` is built in code, pointed at the
``migrations`` folder inside the package, and handed the caller's connection. The chain
records its position in :data:`VERSION_TABLE` (prefixed like every table this package
owns) so it never reads or moves the host's ``alembic_version``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from .schema import TABLE_PREFIX

__all__ = ["MIGRATIONS_DIR", "VERSION_TABLE", "alembic_config", "include_object", "upgrade"]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSION_TABLE = f"{TABLE_PREFIX}alembic_version"


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic ``Config`` for this chain; ``env.py`` uses *connection* when given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Limit autogenerate to this package's tables; every other table belongs to someone else.

    The version table carries the prefix but is alembic's bookkeeping, not part of the
    model, so it is excluded too (otherwise autogenerate would propose to drop it).
    """
    if type_ == "table":
        return bool(name) and str(name).startswith(TABLE_PREFIX) and name != VERSION_TABLE
    table = getattr(obj, "table", None)
    if table is not None:
        return str(table.name).startswith(TABLE_PREFIX)
    return True


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade this chain to *revision* on a synchronous *connection*.

    From async code: ``await async_conn.run_sync(upgrade)``.
    """
    command.upgrade(alembic_config(connection), revision)
