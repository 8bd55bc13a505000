"""Gateway-lifetime contributions: services and HTTP routers.

Services start in registration order once the database and session factory exist, all with
one shared ``ExtensionRuntimeDeps``; a failing start is attributed and the Gateway carries
on. They stop in reverse order, each under its own timeout, after runs have drained (a run's
``on_task_stop`` may still hand work to a service) and before the engine is disposed (a
service may flush to the database on stop).

What is stopped is every service whose start was *attempted*, as in DeerFlow: a start may
acquire a connection pool or a background task and then fail, time out or be cancelled, and
its ``stop`` is the only place that can release them. The attempt is recorded before the
start is awaited, into an :class:`AttemptedServices` the lifespan holds, so a startup that
fails or is cancelled part-way stops exactly the services it got to, in reverse order.

Routers are mounted after every host route and are all-or-nothing (DeerFlow's admission
rules): a router is rejected whole, with a diagnostic, when one of its routes

* could answer a path the Gateway serves without its token (``/health``, ``/ok``, ``/docs``,
  ``/openapi.json``... and the docs' assets) or one under a host Mount (which answers first),
  for any method: such a route would be an API reachable without the token, or dead;
* could never answer: an earlier route of the host, an earlier extension or its own router
  takes every request it matches, for a method they share (the same path template, parameter
  names aside; ``/items/search`` after ``/items/{id}``). Routes that merely overlap
  (``/items/search`` *before* ``/items/{id}``) are how FastAPI APIs are written; FastAPI
  tries them in order, and so do we. The message names the earlier route's owner;
* has an endpoint that is not callable, or cannot be built by FastAPI;

or when the router holds a WebSocket route or a Mount, or carries startup/shutdown handlers
or a lifespan. Partial mounting would leave an extension with half an API; lifespans and
startup handlers would run outside the host's ordered startup and shutdown. FastAPI may
build an included router's routes lazily, on the first request past the routes before it,
where one bad route fails *every* such request: the routes are built at mount time and a
failure takes out everything the include added. Each mounted route remembers its extension
(``route_extension``), so an error escaping one is answered and attributed by the Gateway's
error layer instead of reaching the server as a bare crash.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import regex
from fastapi.routing import APIWebSocketRoute
from starlette.convertors import CONVERTOR_TYPES
from starlette.routing import Mount, WebSocketRoute, compile_path

from deerflow_ext.adapters.fastapi_private import (
    build_included_routes,
    included_router,
    is_default_lifespan,
    merged_lifespan_parts,
    routes_changed,
)
from deerflow_ext.exception_text import exception_text
from deerflow_extension_api import ExtensionRuntimeDeps

from ..boundary.diagnostics import DiagnosticsList
from ..boundary.exits import EXTENSION_FAILURES
from ..boundary.loopwatch import HookBlocked, RunningHook, register_site
from ..boundary.origin import cancellation_requests, is_host_cancellation
from ..contract.snapshot import Contribution, LoadedExtensions

__all__ = [
    "DEFAULT_SERVICE_START_TIMEOUT",
    "DEFAULT_SERVICE_STOP_TIMEOUT",
    "HOST",
    "AttemptedServices",
    "ReservedPaths",
    "RouteKey",
    "RouterRejection",
    "contributed_routes",
    "mount_routers",
    "route_extension",
    "route_keys",
    "start_services",
    "stop_services",
]

DEFAULT_SERVICE_STOP_TIMEOUT = 10.0
# Starting may legitimately run an extension's migrations, so it gets longer than a stop;
# but it is bounded all the same: a start that never returns would keep the Gateway from
# ever serving, which is exactly the "slow extension stalls the host" failure we rule out.
DEFAULT_SERVICE_START_TIMEOUT = 60.0


# -- services -------------------------------------------------------------------------------


class AttemptedServices:
    """The services whose ``start`` was attempted, in start order; filled while starting."""

    def __init__(self) -> None:
        self._services: list[Contribution[Any]] = []

    @property
    def services(self) -> tuple[Contribution[Any], ...]:
        return tuple(self._services)

    def note(self, contribution: Contribution[Any]) -> None:
        self._services.append(contribution)

    def __len__(self) -> int:
        return len(self._services)


async def start_services(
    extensions: LoadedExtensions,
    deps: ExtensionRuntimeDeps,
    *,
    start_timeout: float = DEFAULT_SERVICE_START_TIMEOUT,
    diagnostics: DiagnosticsList | None = None,
    attempted: AttemptedServices | None = None,
) -> AttemptedServices:
    """Start every contributed service in registration order; failures fail open.

    Each start is bounded by ``start_timeout`` seconds. Each service is noted in
    ``attempted`` (a new one when not given) *before* its start is awaited, so that it is
    stopped later whatever its start did, and even when a cancellation of the host task
    ends this call part-way (that cancellation propagates).
    """
    diags = diagnostics if diagnostics is not None else extensions.diagnostics
    noted = attempted if attempted is not None else AttemptedServices()
    for contribution in extensions.services:
        noted.note(contribution)
        budget = asyncio.timeout(start_timeout)
        try:
            async with budget:
                await contribution.contributor.start(deps)
        except (TimeoutError, HookBlocked) as exc:
            if _over_budget(exc, budget):
                message = f"service start timed out after {start_timeout:.1f}s"
                diags.record(contribution.extension, "service", _blocked(exc, message), exc=exc)
            else:
                diags.record(contribution.extension, "service", f"service start failed: {_describe(exc)}", exc=exc)
        except EXTENSION_FAILURES as exc:  # its KeyboardInterrupt/SystemExit too: exits.py
            if is_host_cancellation(exc):  # the spec's cancellation rule: see origin.py
                raise
            diags.record(contribution.extension, "service", f"service start failed: {_describe(exc)}", exc=exc)
    return noted


async def stop_services(
    attempted: AttemptedServices,
    *,
    stop_timeout: float = DEFAULT_SERVICE_STOP_TIMEOUT,
    diagnostics: DiagnosticsList,
) -> None:
    """Stop every attempted service in reverse order, each bounded by ``stop_timeout`` seconds.

    This runs as cleanup, possibly *because* the host task was cancelled (a cancelled
    startup): that cancellation is already being handled, so only a further one stops the
    cleanup; a ``CancelledError`` a service raises itself is attributed like any failure.
    """
    baseline = cancellation_requests()
    for contribution in reversed(attempted.services):
        budget = asyncio.timeout(stop_timeout)
        try:
            async with budget:
                await contribution.contributor.stop()
        except (TimeoutError, HookBlocked) as exc:
            if _over_budget(exc, budget):
                message = f"service stop timed out after {stop_timeout:.1f}s"
                diagnostics.record(contribution.extension, "service", _blocked(exc, message), exc=exc)
            else:
                diagnostics.record(contribution.extension, "service", f"service stop failed: {_describe(exc)}", exc=exc)
        except EXTENSION_FAILURES as exc:  # its KeyboardInterrupt/SystemExit too: exits.py
            if is_host_cancellation(exc, baseline):  # the spec's cancellation rule: see origin.py
                raise
            diagnostics.record(contribution.extension, "service", f"service stop failed: {_describe(exc)}", exc=exc)


def _running_service(frame: Any) -> RunningHook | None:
    names = frame.f_locals
    contribution = names.get("contribution")
    if contribution is None:
        return None
    what, bound = ("start", names["start_timeout"]) if "start_timeout" in names else ("stop", names["stop_timeout"])
    return RunningHook(contribution.extension, f"service {what}", bound)


register_site(start_services, _running_service)
register_site(stop_services, _running_service)


def _over_budget(exc: BaseException, budget: asyncio.Timeout) -> bool:
    """Whether the host's own bound ended the hook. A ``TimeoutError`` the service raised
    itself (its own client gave up, say) is its failure, reported as such, not a timeout."""
    return isinstance(exc, HookBlocked) or budget.expired()


def _blocked(exc: BaseException, message: str) -> str:
    # A synchronous block past the bound is ended by the loop watchdog (loopwatch.py).
    return f"{message}; it blocked the event loop and was interrupted" if isinstance(exc, HookBlocked) else message


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "raised CancelledError"  # the spec's wording for a self-inflicted cancellation
    return exception_text(exc)


# -- routers --------------------------------------------------------------------------------


_PARAM = re.compile(r"\{([^}:]+)(?::([^}]+))?\}")
_LONE = re.compile(r"\{([a-z_]+)\}")  # a normalised parameter: {str}, {int}, {path}...
HOST = "the host"  # the owner named for a route of the Gateway's own


@dataclass(frozen=True)
class ReservedPaths:
    """Paths the Gateway answers outside its usual checks: ``exact`` paths and everything
    under ``prefixes`` are served without the API token (liveness, the docs and their
    assets; ``gateway/access.py``). A contributed route that could answer one of them would
    be an API reachable without the token, so it is refused for every method."""

    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RouteKey:
    """A route's identity: its methods and its path template.

    ``segments`` normalise each parameter to its convertor (``{id}`` and ``{tid}`` are the
    same ``{str}``; ``{v:int}`` is ``{int}``), so two keys sharing a method and ``template``
    are the same route twice.
    """

    methods: frozenset[str]
    segments: tuple[str, ...]
    path: str

    @property
    def template(self) -> str:
        """The path with parameter names dropped, trailing slash kept (it routes differently)."""
        return "/" + "/".join(self.segments) + ("/" if len(self.path) > 1 and self.path.endswith("/") else "")

    def shadowed_by(self, earlier: RouteKey) -> bool:
        """Whether ``earlier`` answers every request this route matches, for a method they
        share: this one could never answer them (the same template twice, or a literal
        segment under an earlier parameter, ``/items/search`` after ``/items/{id}``).

        Proven segment by segment with the built-in convertors' languages; what cannot be
        proven is not shadowed (FastAPI tries routes in order; mounting a reachable route is
        the safe mistake here). A ``{path}`` parameter (``.*``) matches no newline while
        ``{str}`` (``[^/]+``) does, so ``/files/{id}`` after ``/files/{rest:path}`` still
        answers a segment holding one: DeerFlow's reading too, which keeps that pair legal.
        """
        if not (self.methods & earlier.methods):
            return False
        if self.template == earlier.template:
            return True
        if "{" not in self.path:  # a literal path: does the earlier route's regex take it?
            return compile_path(earlier.path)[0].fullmatch(self.path) is not None
        mine, theirs = self.segments, earlier.segments
        if theirs and theirs[-1] == "{path}":
            head = len(theirs) - 1
            return (
                len(mine) > head
                and all(_segment_covers(t, m) for t, m in zip(theirs[:head], mine, strict=False))
                and all(_free_of_newline(m) for m in mine[head:])
            )
        return (
            len(mine) == len(theirs)
            and self.template.endswith("/") == earlier.template.endswith("/")
            and all(_segment_covers(t, m) for t, m in zip(theirs, mine, strict=True))
        )

    def overlaps(self, other: RouteKey) -> bool:
        """Could one request reach both routes? Same method and a path both templates match.

        Not a reason to refuse a router (FastAPI tries routes in order, so ``/items/search``
        before ``/items/{id}`` is how such APIs are written); the host's own routers are kept
        free of overlaps so that their order decides only speed."""
        if not (self.methods & other.methods):
            return False
        return _segments_overlap(self.segments, other.segments)


@dataclass(frozen=True)
class RouterRejection:
    extension: str
    reason: str


def _normalise(path: str) -> tuple[str, ...]:
    stripped = path.strip("/")
    return tuple(_PARAM.sub(_convertor, raw) for raw in stripped.split("/")) if stripped else ()


def _convertor(match: re.Match[str]) -> str:
    return "{" + (match.group(2) or "str") + "}"


def _segments_overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    for x, y in zip(a, b, strict=False):
        if x == "{path}" or y == "{path}":
            return True
        if x != y and "{" not in x and "{" not in y:
            return False
    return len(a) == len(b)


_CONVERTOR_REGEX = {name: re.compile(c.regex) for name, c in CONVERTOR_TYPES.items()}
# Which convertor's values another's always are: every int is a str, a float... (built-ins only).
_WIDER = {"str": {"int", "float", "uuid"}, "float": {"int"}, "path": {"int", "float", "uuid"}}


def _segment_covers(earlier: str, later: str) -> bool:
    """Whether every value of the ``later`` template segment matches ``earlier``."""
    if earlier == later:
        return True
    if "{" not in later:  # a literal: does the earlier segment's pattern take it?
        return _segment_regex(earlier).fullmatch(later) is not None
    wide = earlier[1:-1] if _LONE.fullmatch(earlier) else None
    if wide is None or wide not in _CONVERTOR_REGEX:
        return False
    if _LONE.fullmatch(later):
        return later[1:-1] in _WIDER.get(wide, set())
    # A literal with parameters ("v{int}"): one non-empty segment, without a slash when its
    # parameters are built-ins other than {path}.
    return wide == "str" and all(m.group(1) in _WIDER["str"] | {"str"} for m in _LONE.finditer(later))


def _free_of_newline(segment: str) -> bool:
    """Whether no value of ``segment`` holds a newline (what a ``{path}`` cannot match)."""
    return "\n" not in segment and all(m.group(1) in {"int", "float", "uuid", "path"} for m in _LONE.finditer(segment))


def _segment_regex(segment: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]*\})", segment)
    return re.compile(
        "".join(
            f"(?:{_CONVERTOR_REGEX[p[1:-1]].pattern})"
            if _LONE.fullmatch(p) and p[1:-1] in _CONVERTOR_REGEX
            else ("(?!)" if p.startswith("{") else re.escape(p))
            for p in parts
        )
    )


def _methods(route: Any) -> frozenset[str]:
    methods = set(getattr(route, "methods", None) or ())
    if "GET" in methods:
        methods.add("HEAD")  # Starlette answers HEAD with the GET route
    return frozenset(methods)


def _flatten(routes: Iterable[Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(full path, route) for every route, descending into included routers."""
    for route in routes:
        included = included_router(route)
        if included is not None:
            original, inner_prefix = included
            yield from _flatten(original.routes, prefix + inner_prefix)
            continue
        yield prefix + getattr(route, "path", ""), route


def route_keys(routes: Iterable[Any], prefix: str = "") -> list[RouteKey]:
    """Keys of the HTTP routes among ``routes`` (Mounts and WebSocket routes have none)."""
    keys = []
    for path, route in _flatten(routes, prefix):
        methods = _methods(route)
        if methods:
            keys.append(RouteKey(methods, _normalise(path), path))
    return keys


def _host_mounts(routes: Iterable[Any]) -> tuple[str, ...]:
    """``/prefix/`` of each host Mount: it answers every path below it, so a contributed
    route there would never be reached (the docs' assets, ``/static-offline-docs``)."""
    return tuple(route.path.rstrip("/") + "/" for route in routes if isinstance(route, Mount))


def _default_lifespan(router: Any) -> bool:
    return not _has_own_lifespan(getattr(router, "lifespan_context", None))


def _has_own_lifespan(lifespan: Any) -> bool:
    """Whether ``lifespan`` runs code of the extension's own.

    Starlette installs a stand-in when no lifespan was given (it runs only
    ``on_startup``/``on_shutdown`` handlers, which are checked separately), and
    ``include_router`` replaces the parent's lifespan with one merging the parent's and the
    child's, so a router that merely includes another one would otherwise look like it
    carried a lifespan: we look through both (``adapters/fastapi_private.py``). Anything we
    cannot see through is treated as the extension's own — refusing a harmless router is the
    safe mistake.
    """
    if lifespan is None or is_default_lifespan(lifespan):
        return False
    parts = list(merged_lifespan_parts(lifespan))
    if parts:
        return any(_has_own_lifespan(part) for part in parts)
    return True


def _reserved_reason(path: str, reserved: ReservedPaths, mounts: Sequence[str]) -> str | None:
    """Why a route at ``path`` may not be mounted: it could answer a path served without the
    token, or one a host Mount answers first. Decided on the regex Starlette will route
    with (``compile_path``, custom convertors included): a template such as ``/{name}`` can
    answer ``/ok`` as surely as ``/ok`` itself can. A prefix is entered when some path the
    route answers starts with it (``regex``'s partial matching decides that)."""
    pattern = compile_path(path)[0].pattern
    exact = re.compile(pattern)
    for reserved_path in sorted(reserved.exact):
        if exact.fullmatch(reserved_path):
            return f"route {path} can answer the host's {reserved_path}, which is served without the API token"
    partial = regex.compile(pattern)
    for mount in mounts:
        if partial.fullmatch(mount, partial=True):
            return f"route {path} lies under the host's mount {mount.rstrip('/')}, which answers first: unreachable"
    for prefix in reserved.prefixes:
        if partial.fullmatch(prefix, partial=True):
            return f"route {path} can answer under the host's {prefix}, which is served without the API token"
    return None


def _rejection(
    router: Any, taken: Sequence[tuple[RouteKey, str]], reserved: ReservedPaths, mounts: Sequence[str]
) -> tuple[str | None, list[RouteKey]]:
    if getattr(router, "on_startup", None) or getattr(router, "on_shutdown", None):
        return "it registers startup/shutdown handlers; use a service instead", []
    if not _default_lifespan(router):
        return "it has a lifespan; use a service instead", []
    mine: list[RouteKey] = []
    for path, route in _flatten(router.routes):
        if isinstance(route, WebSocketRoute | APIWebSocketRoute):
            return f"it holds a WebSocket route ({path}); WebSocket routes are not supported", []
        if isinstance(route, Mount):
            return f"it holds a Mount ({path or '/'}); mounted sub-applications are not supported", []
        methods = _methods(route)
        if not methods:
            return f"it holds a route of unsupported type {type(route).__name__} ({path})", []
        endpoint = getattr(route, "endpoint", None)
        if not callable(endpoint):
            return f"route {path} has an endpoint that is not callable ({type(endpoint).__name__})", []
        reason = _reserved_reason(path, reserved, mounts)
        if reason is not None:
            return reason, []
        key = RouteKey(methods, _normalise(path), path)
        for earlier, owner in (*taken, *((m, "this router") for m in mine)):
            if key.shadowed_by(earlier):
                shared = key.methods & earlier.methods
                verbs = ", ".join(sorted(shared - {"HEAD"} or shared))
                return f"route {verbs} {path} conflicts with the earlier route {earlier.path} of {owner}", []
        mine.append(key)
    return None, mine


def mount_routers(
    app: Any,
    extensions: LoadedExtensions,
    *,
    diagnostics: DiagnosticsList | None = None,
    reserved: ReservedPaths | None = None,
) -> tuple[Contribution[Any], ...]:
    """Mount the contributed routers after the host's routes; returns the mounted ones.

    Rejections are recorded in ``diagnostics``, by default the snapshot's own list.
    ``reserved``: the paths the Gateway serves without its token (none by default)."""
    diags = diagnostics if diagnostics is not None else extensions.diagnostics
    reserved = reserved if reserved is not None else ReservedPaths()
    taken: list[tuple[RouteKey, str]] = [(key, HOST) for key in route_keys(app.router.routes)]
    mounts = _host_mounts(app.router.routes)
    mounted: list[Contribution[Any]] = []
    owners = contributed_routes(app)
    for contribution in extensions.routers:
        router = contribution.contributor
        try:
            reason, keys = _rejection(router, taken, reserved, mounts)
        except Exception as exc:  # a malformed router object: reject, attributed
            reason, keys = f"it could not be inspected: {_describe(exc)}", []
        if reason is not None:
            diags.record(contribution.extension, "router", f"router rejected: {reason}")
            continue
        before = _include(app, router, contribution, diags)
        if before is None:
            continue
        # Remember who contributed each route, under both the extension's own route objects
        # and whatever include_router appended (FastAPI puts one or the other in
        # scope["route"], depending on its version), so a failing request can be attributed.
        for _, route in (*_flatten(router.routes), *_flatten(app.router.routes[before:])):
            owners[id(route)] = (route, contribution.extension)
        taken.extend((key, f"extension {contribution.extension}") for key in keys)
        mounted.append(contribution)
    return tuple(mounted)


def _include(app: Any, router: Any, contribution: Contribution[Any], diags: DiagnosticsList) -> int | None:
    """``include_router``, all or nothing: every route is built now (FastAPI may defer that
    to the first request, where one bad route fails every request past the host's routes),
    and a failure removes whatever this include added, lifespan merge included. Returns
    where the router's routes begin in the app's list; ``None`` when it was not mounted."""
    routes, before, lifespan = app.router.routes, len(app.router.routes), app.router.lifespan_context
    try:
        app.include_router(router)
        build_included_routes(routes[before:])
    except Exception as exc:
        del routes[before:]
        app.router.lifespan_context = lifespan
        routes_changed(app.router)
        diags.record(contribution.extension, "router", f"router rejected: {_describe(exc)}", exc=exc)
        return None
    return before


def contributed_routes(app: Any) -> dict[int, tuple[Any, str]]:
    """``id(route) -> (route, extension)`` for every mounted contributed route of ``app``.

    Keyed by identity because Starlette routes define ``__eq__`` without ``__hash__``; the
    route is kept in the value so its id cannot be reused while the app lives.
    """
    owners: dict[int, tuple[Any, str]] | None = getattr(app.state, "extension_routes", None)
    if owners is None:
        owners = app.state.extension_routes = {}
    return owners


def route_extension(scope: Any) -> str | None:
    """The extension that contributed the route serving ``scope``; ``None`` for host routes."""
    route, app = scope.get("route"), scope.get("app")
    if route is None or app is None:
        return None
    owners: dict[int, tuple[Any, str]] | None = getattr(app.state, "extension_routes", None)
    found = owners.get(id(route)) if owners else None
    return found[1] if found is not None and found[0] is route else None
