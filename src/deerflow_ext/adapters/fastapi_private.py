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

And to undo an ``include_router`` that failed, two more:

* since FastAPI 0.16x an included router's routes are built lazily, on the first request
  that gets past the routes before it, so a route that cannot be built (a non-callable
  endpoint) fails *every* such request instead of the include; ``iter_route_contexts``
  (``fastapi.routing``) builds them, and we call it right after including to see the failure
  then. Older FastAPI built them in ``include_router`` itself (and left the ones copied so
  far in place when one failed), which is why the caller cuts the route list back on failure;
* ``APIRouter._mark_routes_changed``, which that lazy build keys its cache on.

Fallback: what cannot be seen through counts as the extension's own. An included router
that is not recognised is one route of unsupported type, a lifespan that is not recognised
is a lifespan — the router is refused whole, with that reason, which is the safe mistake.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from fastapi import routing as _fastapi_routing

__all__ = ["build_included_routes", "included_router", "is_default_lifespan", "merged_lifespan_parts", "routes_changed"]

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


def build_included_routes(routes: list[Any]) -> None:
    """Build now whatever FastAPI would build lazily for ``routes`` on a first request, so
    that a route which cannot be built raises here. Nothing to do on a FastAPI that builds
    them in ``include_router`` (no ``iter_route_contexts``)."""
    build = getattr(_fastapi_routing, "iter_route_contexts", None)
    if build is not None:
        for _ in build(routes):
            pass


def routes_changed(router: Any) -> None:
    """Tell ``router`` its route list was edited in place (it caches what it built from it)."""
    mark = getattr(router, "_mark_routes_changed", None)
    if callable(mark):
        mark()
