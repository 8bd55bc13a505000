"""A SQLAlchemy Core statement compiled once, for the hot paths that send it to a driver
without SQLAlchemy's execution layer.

Why: SQLAlchemy's ``Connection.execute`` costs a statement its cache key, a
compiled-cache lookup, an execution context and a result object, every time: on the store's
SQLite path 50-60 us of the GIL a statement in a busy server, about three times what the
statement costs the driver. The store's hot path sends the same few module-level statements
again and again, so they are compiled here once per set of parameter keys, and a call only
puts its values in the compiled order. asyncpg sends them from the event loop
(``loop_statements``), pysqlite inside a transaction (``sqlite_statements``).

What the compiled form leaves out is refused here, not silently skipped: an expanding ``IN``
(its placeholders depend on each call's values), and a column default computed in Python
(SQLAlchemy fills it in while it executes; here it would be NULL).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Compiled", "compile_for"]

Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class Compiled:
    """A statement's text in its dialect's placeholders, its parameters' names in that
    order, the values it bound itself (its literals), and per parameter the dialect's bind
    processor, or ``None`` (an empty tuple: none anywhere, the driver takes values as they
    are)."""

    sql: str
    names: tuple[str, ...]
    fixed: Mapping[str, Any]
    processors: tuple[Processor | None, ...] = ()

    def values(self, params: Mapping[str, Any]) -> list[Any]:
        """The statement's parameters, in order, from ``params`` or its own literals."""
        try:
            values = [params[name] if name in params else self.fixed[name] for name in self.names]
        except KeyError as exc:
            raise TypeError(f"no value for the statement's parameter {exc.args[0]!r}") from None
        if self.processors:
            # None too: a JSON column's processor writes it as JSON's null, as SQLAlchemy does.
            pairs = zip(values, self.processors, strict=True)
            values = [value if process is None else process(value) for value, process in pairs]
        return values


@functools.cache
def compile_for(dialect: Dialect, statement: ClauseElement, keys: frozenset[str], *, processed: bool) -> Compiled:
    """``statement`` compiled for ``dialect``, the parameters ``keys`` given at execution (an
    INSERT or UPDATE without ``values`` sets the columns they name, as SQLAlchemy's
    ``execute`` does). With ``processed``, values pass the dialect's bind processors (JSON
    to text, a datetime to SQLite's text) as SQLAlchemy's execution would pass them; without,
    the driver's own codecs convert them. Cached: the hot path's statements and dialects are
    module constants."""
    # A statement's compiler is SQLAlchemy's SQLCompiler, whose names and binds are read here.
    compiled = cast(SQLCompiler, statement.compile(dialect=dialect, column_keys=sorted(keys)))
    if "POSTCOMPILE" in compiled.string:
        raise ValueError("an expanding IN cannot be compiled once; bind its values another way")
    prefetched = [column.key for column in (*compiled.insert_prefetch, *compiled.update_prefetch)]
    if prefetched:
        raise ValueError(f"give the columns {', '.join(prefetched)} a value: their defaults are computed in Python")
    names = tuple(compiled.positiontup or ())
    # The values the statement holds itself; a parameter it leaves open must be given.
    fixed = {name: value for name, value in compiled.params.items() if not compiled.binds[name].required}
    processors: tuple[Processor | None, ...] = ()
    if processed:
        # The dialect's own form of each parameter's type, as SQLAlchemy's execution picks it.
        found = tuple(compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
        processors = found if any(found) else ()
    return Compiled(compiled.string, names, fixed, processors)
