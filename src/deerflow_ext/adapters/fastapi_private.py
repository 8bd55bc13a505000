"""FastAPI's and Starlette's router internals, as the router checks read them.

``extensions/serving/services_routers.py`` refuses a contributed router that carries a lifespan, a WebSocket
route or a Mount, and checks its HTTP routes for conflicts. To see every route it must look
through three things neither library documents:

* FastAPI's ``_IncludedRouter`` (``include_router`` keeps the included router as a route
  whose ``original_router`` and ``include_context.prefix`` say what and where);
* Starlette's ``_DefaultLifespan``, installed when no lifespan was given (it only runs the
  ``on_startup``/``on_shutdown`` handlers, which are checked on their own);
* FastAPI's ``_merge_lifespan_context``, whose ``merged_lifespan`` closure (names
  ``original_context`` and ``nested_context``) replaces the parent's lifespan on every
  ``include_router``.

Fallback: what cannot be seen through counts as the extension's own. An included router
that is not recognised is one route of unsupported type, a lifespan that is not recognised
is a lifespan — the router is refused whole, with that reason, which is the safe mistake.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

__all__ = ["included_router", "is_default_lifespan", "merged_lifespan_parts"]

_MERGED = "_merge_lifespan_context.<locals>.merged_lifespan"


def included_router(route: Any) -> tuple[Any, str] | None:
    """``(router, prefix)`` when ``route`` is FastAPI's record of an included router."""
    original = getattr(route, "original_router", None)
    if original is None:
        return None
    context = getattr(route, "include_context", None)
    return original, getattr(context, "prefix", "") or ""


def is_default_lifespan(lifespan: Any) -> bool:
    """Whether ``lifespan`` is Starlette's stand-in for "no lifespan given"."""
    return type(lifespan).__name__ == "_DefaultLifespan"


def merged_lifespan_parts(lifespan: Any) -> Iterator[Any]:
    """The two lifespans ``include_router`` merged into ``lifespan``; nothing when it is
    not such a merge (or the merge no longer looks like one)."""
    merged = getattr(lifespan, "__wrapped__", None)
    if merged is None or not getattr(merged, "__qualname__", "").endswith(_MERGED):
        return
    parts = inspect.getclosurevars(merged).nonlocals
    if {"original_context", "nested_context"} <= parts.keys():
        yield parts["original_context"]
        yield parts["nested_context"]
