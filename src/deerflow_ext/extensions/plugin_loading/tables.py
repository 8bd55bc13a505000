"""Table-prefix ownership: which tables belong to extensions, so host migrations leave them be.

An extension that keeps its own tables (own SQLAlchemy ``MetaData``, own migration chain)
declares ``table_prefix`` in ``config.yaml``. The host then excludes every table with that
prefix from ``alembic revision --autogenerate``; otherwise a host migration would propose to
drop them. Prefixes are registered for *every* entry that declares one — disabled or
failing included — because the tables may already exist in the database.

Decisions (the spec is silent on the details):

* A prefix **collides with a host table** when a host table name starts with it
  (``run`` claims ``runs``, ``checkpoint`` claims ``checkpoints``; ``runs`` claims ``runs``
  itself). That is exactly the case in which :func:`make_include_object` would hide a host
  table from host migrations. A prefix that merely *extends* a host name (``runs_acme_``)
  hides no host table and is allowed. Comparison is case-insensitive, since unquoted SQL
  identifiers are case-folded by the databases the host supports.
* Two entries of **different extensions** (different attribution) whose prefixes are equal
  or one starts with the other collide too: their tables would be indistinguishable. Two
  entries of the same extension (same ``use`` twice) may share a prefix; they share tables.
* Either collision raises :class:`TablePrefixCollisionError`, which aborts startup whatever
  ``required`` says, because silently dropping an extension's migrations — or the host's —
  destroys data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from deerflow_ext.persistence.models import HOST_TABLES
from deerflow_ext.persistence.ownership import IncludeObject, prefix_include_object
from deerflow_ext.persistence.ownership import owner_of_table as _owner_of_table

from ..contract.snapshot import TablePrefix

__all__ = [
    "HOST_TABLE_NAMES",
    "TablePrefixCollisionError",
    "check_table_prefixes",
    "host_table_collisions",
    "make_include_object",
    "owner_of_table",
]

# The tables the host owns, one list for the loader's default, ``doctor``, the Gateway and the
# author kit alike: the persistence layer's, which is built from its own models (so a new host
# table such as ``thread_leases`` is in it the moment it exists) plus alembic's version table and
# the checkpointer's tables.
HOST_TABLE_NAMES: tuple[str, ...] = HOST_TABLES


class TablePrefixCollisionError(RuntimeError):
    """A table prefix overlaps a host table or another extension's prefix; startup stops."""

    def __init__(self, prefix: TablePrefix, message: str) -> None:
        self.prefix = prefix
        super().__init__(message)


def host_table_collisions(prefix: str, host_tables: Iterable[str] = HOST_TABLE_NAMES) -> tuple[str, ...]:
    """The host tables ``prefix`` would claim (empty when it is safe)."""
    folded = prefix.casefold()
    return tuple(sorted(name for name in host_tables if name.casefold().startswith(folded)))


def check_table_prefixes(
    prefixes: Sequence[TablePrefix], host_tables: Iterable[str] = HOST_TABLE_NAMES
) -> tuple[TablePrefix, ...]:
    """Validate every registered prefix; raise :class:`TablePrefixCollisionError` on the first clash.

    Returns the prefixes unchanged (in config order) so the caller can freeze them.
    """
    host = tuple(host_tables)
    seen: list[TablePrefix] = []
    for item in prefixes:
        claimed = host_table_collisions(item.prefix, host)
        if claimed:
            raise TablePrefixCollisionError(
                item,
                f"table_prefix {item.prefix!r} collides with host table(s) {', '.join(claimed)}; "
                "choose a prefix no host table name starts with",
            )
        for other in seen:
            if other.extension == item.extension:
                continue
            a, b = other.prefix.casefold(), item.prefix.casefold()
            if a.startswith(b) or b.startswith(a):
                raise TablePrefixCollisionError(
                    item,
                    f"table_prefix {item.prefix!r} overlaps {other.prefix!r} of "
                    f"{other.extension} (entry {other.label!r}); two extensions cannot own the same tables",
                )
        seen.append(item)
    return tuple(prefixes)


def _prefixes(items: Iterable[TablePrefix | str]) -> tuple[str, ...]:
    return tuple(item.prefix if isinstance(item, TablePrefix) else item for item in items)


def owner_of_table(name: str, prefixes: Iterable[TablePrefix | str]) -> str | None:
    """The registered prefix ``name`` falls under, if any."""
    return _owner_of_table(name, _prefixes(prefixes))


def make_include_object(prefixes: Iterable[TablePrefix | str]) -> IncludeObject:
    """An alembic ``include_object`` hook that leaves extension-owned tables alone
    (the persistence layer's :func:`~deerflow_ext.persistence.ownership.prefix_include_object`)."""
    return prefix_include_object(_prefixes(prefixes))
