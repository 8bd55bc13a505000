"""Which tables in the host's database belong to extensions, by the prefixes they declared.

It lives in the persistence layer because the host's own migrations need it (a host revision
must never propose to drop an extension's tables), and the extension runtime builds on the
persistence layer, not the other way round: ``deerflow_ext.extensions.plugin_loading.tables`` registers and
checks the prefixes and hands them here as plain strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["IncludeObject", "owner_of_table", "prefix_include_object"]

IncludeObject = Callable[[Any, "str | None", str, bool, Any], bool]


def owner_of_table(name: str, prefixes: Iterable[str]) -> str | None:
    """The registered prefix ``name`` falls under (case-insensitively), if any."""
    folded = name.casefold()
    for prefix in prefixes:
        if folded.startswith(prefix.casefold()):
            return prefix
    return None


def prefix_include_object(prefixes: Iterable[str]) -> IncludeObject:
    """An alembic ``include_object`` hook that leaves extension-owned tables alone.

    Tables are excluded by name; their columns, indexes and constraints by the name of the
    table they belong to, so autogenerate neither drops nor alters anything inside them.
    """
    frozen = tuple(prefixes)

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        if not frozen:
            return True
        if type_ == "table":
            return name is None or owner_of_table(name, frozen) is None
        table = getattr(obj, "table", None)
        table_name = getattr(table, "name", None)
        if isinstance(table_name, str):
            return owner_of_table(table_name, frozen) is None
        return True

    return include_object
