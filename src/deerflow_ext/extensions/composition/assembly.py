"""Agent assembly: describe what construction decided, and tell the observers.

Construction picks the effective model, renders the prompt, filters tools and composes the
stack in one synchronous call; none of that can be recovered afterwards, so the builder
reports it here at the end of every construction. Assembly observers are the one
synchronous contribution (there is no loop to await on), so they are called inline, in
registration order, and must be cheap.

Descriptors cost hashing, so the builder passes a *callable*: with no assembly observer
registered it is never called and no descriptor, hash or schema is ever computed.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

from deerflow_ext.exception_text import exception_text
from deerflow_ext.memo import ClassMemo, Memo, scalar_key
from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    MiddlewareDescriptor,
    ToolDescriptor,
    canonical_hash,
    canonical_json,
    collect_release_policies,
)

from ... import __version__
from ..boundary.diagnostics import log_extension_failure
from ..boundary.exits import EXTENSION_FAILURES
from ..boundary.loopwatch import RunningHook, register_site
from ..boundary.origin import is_host_cancellation
from ..contract.snapshot import LoadedExtensions
from ..operator_view.hook_metrics import call_stats, count_call
from .isolation import IsolatedMiddleware

__all__ = [
    "PROBED_ATTRIBUTES",
    "build_info",
    "describe_middleware",
    "describe_tool",
    "emit_agent_assembled",
]

logger = logging.getLogger("deerflow_ext.extensions")

#: Public attributes read from a middleware that declares no ``release_policy_parameters``.
#: A fixed list, so a descriptor never depends on whatever else an object happens to hold.
PROBED_ATTRIBUTES: tuple[str, ...] = (
    "enabled",
    "max_retries",
    "max_per_run",
    "max_tokens",
    "limit",
    "threshold",
    "timeout",
    "timeout_seconds",
    "trigger_messages",
    "keep_messages",
    "max_chars",
    "model_name",
)

_UNKNOWN = "unknown"
_ABSENT: Any = object()


def emit_agent_assembled(extensions: LoadedExtensions, build: Callable[[], AgentAssemblyDescriptor]) -> None:
    """Build one descriptor and hand it to every assembly observer, in registration order.

    Never raises an ``Exception``: an observer that fails is logged (attributed, not added to
    the diagnostics list) and the agent is built anyway; a descriptor the host cannot build
    is logged and skipped. An observer's ``KeyboardInterrupt`` / ``SystemExit`` is such a
    failure too (``exits.py``); only the host's own cancellation propagates.
    """
    observers = extensions.assembly_observers
    if not observers:
        return
    try:
        descriptor = build()
    except Exception:
        logger.exception("agent assembly descriptor could not be built; assembly observers not called")
        return
    for contribution in observers:
        stats = call_stats(contribution.extension, "on_agent_assembled")
        started = time.perf_counter()
        try:
            # Typed to return None, but it is extension code: an async one returns a coroutine.
            observer: Any = contribution.contributor
            returned = observer.on_agent_assembled(extensions.app_store, descriptor)
        except EXTENSION_FAILURES as exc:
            # An observer's own CancelledError is its failure; only the host's propagates.
            count_call(stats, started, exc)
            if is_host_cancellation(exc):
                raise
            log_extension_failure(contribution.extension, f"on_agent_assembled raised {exception_text(exc)}", exc=exc)
            continue
        count_call(stats, started)
        # (None, what a synchronous observer returns, skips asking the Awaitable ABC.)
        if returned is not None and inspect.isawaitable(returned):
            # An async observer cannot run here (construction is synchronous): say so instead
            # of leaving an un-awaited coroutine warning with no attribution.
            close = getattr(returned, "close", None)
            if callable(close):
                close()
            log_extension_failure(
                contribution.extension, "on_agent_assembled must be synchronous; it returned an awaitable"
            )


def _running_observer(frame: Any) -> RunningHook | None:
    contribution = frame.f_locals.get("contribution")
    return None if contribution is None else RunningHook(contribution.extension, "on_agent_assembled")


register_site(emit_agent_assembled, _running_observer)


def describe_middleware(mw: Any) -> MiddlewareDescriptor:
    """A stack entry as the fingerprint sees it.

    A contributed middleware is described by the class it wraps and attributed to its
    extension, so two extensions' middleware never collapse into one entry and the wrapper
    never appears in place of the real class.

    The same class, extension and policy values give the same descriptor object: every
    construction makes new middleware instances that describe alike, and a shared descriptor
    lets the agent's descriptor be reused (``memo.py``: ``DescriptorMemo``). Policy values that are
    not plain scalars get a descriptor of their own every time.
    """
    target, extension = (mw._inner, mw._extension) if isinstance(mw, IsolatedMiddleware) else (mw, None)
    cls = type(target)
    parameters = _policy_parameters(target)
    values = scalar_key(parameters) if parameters else ()
    if values is not None:
        key = (cls, extension, values)
        described = _middleware_descriptors.get(key)
        if described is not None:
            return described
    # Checked where a descriptor is built, not on a hit: equal keys are equal values, which
    # canonical_json takes or refuses alike.
    described = MiddlewareDescriptor(cls.__name__, cls.__module__, _json_checked(parameters), extension)
    if values is not None:
        _middleware_descriptors.put(key, described)
    return described


def _json_checked(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    """``parameters``, or the error record when ``canonical_json`` would refuse a value.

    Keys are strings (``collect_release_policies`` makes them so; probed names are), so
    canonical_json accepts the mapping exactly when it accepts every value. Probed values are
    ready already (probing skips the others); a declared one that is not is recorded the way
    a declaration that raises is, not dropped, so the broken declaration shows in the
    fingerprint instead of hiding a change.
    """
    for value in parameters.values():
        if not _json_ready(value):
            return {"error": TypeError.__name__}
    return parameters


#: Middleware descriptors by (class, extension, policy values as ``scalar_key``).
_middleware_descriptors: Memo[tuple[type, str | None, tuple[Hashable, ...]], MiddlewareDescriptor] = Memo()


def _policy_parameters(target: Any) -> Mapping[str, Any]:
    """What ``target`` declares (as ``collect_release_policies`` reads it, values unchecked:
    see :func:`_json_checked`), else the probed attributes it has."""
    cls = type(target)
    plan = _probe_plans.get(cls) or _probe_plans.load(cls)
    values = None if plan.dynamic else getattr(target, "__dict__", None)
    if values is None or plan.may_declare or _DECLARE in values:
        declared = collect_release_policies([target])
        if declared:
            # A new dict of its own (collect_release_policies builds it): returned as it is.
            (parameters,) = declared.values()
            return parameters
    if values is None:
        names: Iterable[str] = PROBED_ATTRIBUTES
    elif not plan.on_class and _PROBED.isdisjoint(values):
        # What most middlewares are: nothing to read (and nothing allocated to say so).
        return _NOTHING
    else:
        # Only names the class answers for or the instance holds; in PROBED_ATTRIBUTES' order.
        names = [attr for attr in PROBED_ATTRIBUTES if attr in values or attr in plan.on_class]
    probed: dict[str, Any] = {}
    for attr in names:
        if values is not None and attr not in plan.on_class:
            # Nothing on the class can answer for it: the instance's own value.
            value = values[attr]
        else:
            try:
                # The default spares raising and catching an AttributeError for each of the
                # twelve names a middleware does not have (most of them, for most middlewares).
                value = getattr(target, attr, _ABSENT)
            except Exception:  # a property that raises
                continue
        if value is _ABSENT or callable(value) or not _json_ready(value):
            continue
        probed[attr] = value
    return probed


_DECLARE = "release_policy_parameters"
#: No policy parameters: shared, read-only (a descriptor copies what it is given).
_NOTHING: Mapping[str, Any] = MappingProxyType({})
_PROBED = frozenset(PROBED_ATTRIBUTES)


@dataclasses.dataclass(frozen=True)
class _ProbePlan:
    """How a middleware class's instances are read for the descriptor.

    Speed: every construction describes ~20 middlewares, and probing twelve names with
    ``getattr`` walks each class's MRO for names most classes never define. An attribute a
    class does not define is found only in the instance's ``__dict__``, so that is where
    it is looked up; names the class does define (properties, class attributes, slots) and
    every name of a class that customises attribute access are still read with ``getattr``.
    """

    dynamic: bool  # __getattr__ / __getattribute__ of its own: read everything with getattr
    may_declare: bool  # the class has ``release_policy_parameters`` (else only its instances may)
    on_class: frozenset[str]  # probed names the class itself answers for


_DEFAULT_LOOKUP: Any = object.__getattribute__


def _customises_lookup(cls: type) -> bool:
    lookup: Any = cls.__getattribute__
    return lookup is not _DEFAULT_LOOKUP or hasattr(cls, "__getattr__")


def _new_probe_plan(cls: type) -> _ProbePlan:
    try:
        return _ProbePlan(
            dynamic=_customises_lookup(cls),
            may_declare=hasattr(cls, _DECLARE),
            on_class=frozenset(attr for attr in PROBED_ATTRIBUTES if hasattr(cls, attr)),
        )
    except Exception:  # a class attribute that raises when asked for (extension code)
        return _GETATTR_ONLY


_probe_plans: ClassMemo[_ProbePlan] = ClassMemo(_new_probe_plan)


#: Every name read with ``getattr``, exactly as before there were plans.
_GETATTR_ONLY = _ProbePlan(dynamic=True, may_declare=True, on_class=_PROBED)


#: Ints this small print as JSON under any ``sys.set_int_max_str_digits`` limit.
_INT_BOUND = 10**18


def _json_ready(value: Any) -> bool:
    """Whether ``canonical_json(value)`` succeeds, without serialising the common scalars.

    Speed: every probed value of every host middleware is checked on every construction,
    and ``json.dumps`` costs microseconds per call. For the exact scalar types the answer is
    known; anything else (containers, subclasses, huge ints) is asked of ``canonical_json``.
    """
    cls = type(value)
    if value is None or cls is str or cls is bool:
        return True
    if cls is int and -_INT_BOUND < value < _INT_BOUND:
        return True
    if cls is float:
        return math.isfinite(value)
    try:
        canonical_json(value)
    except TypeError:
        return False
    return True


def describe_tool(
    tool: Any, source: str = "builtin", *, mcp_server: str | None = None, mcp_transport: str | None = None
) -> ToolDescriptor:
    """A tool by hashes of what the model is told: its description and argument schema.

    The same tool, unchanged, gets the same descriptor object: a construction describes the
    same few tools every time, and a shared descriptor lets the agent's be reused
    (``memo.py``: ``DescriptorMemo``). Unchanged means the same name, description, ``args_schema``
    class, tool class and source; a tool whose schema is not a class is described anew.
    """
    known = _tool_descriptors.get(id(tool))
    # A tool described before is no mapping (only tools are remembered): that check, an ABC's
    # Python-level isinstance, is left for what is new here.
    if (known is None or known[0] is not tool) and isinstance(tool, Mapping):
        # A provider built-in tool, passed through as a dict.
        name = str(tool.get("name") or tool.get("type") or "")
        return ToolDescriptor(name, canonical_hash(""), canonical_hash(dict(tool)), source, mcp_server, mcp_transport)
    schema = getattr(tool, "args_schema", None)
    key = (type(tool), tool.name, tool.description, schema, source, mcp_server, mcp_transport)
    if known is not None and known[0] is tool and known[1] == key:
        return known[2]
    described = ToolDescriptor(
        name=tool.name,
        description_hash=text_hash(tool.description or ""),
        schema_hash=_schema_hash(tool),
        source=source,
        mcp_server=mcp_server,
        mcp_transport=mcp_transport,
    )
    if isinstance(schema, type):  # a dict schema may change in place: not remembered
        # The entry holds the tool, so its id cannot be another object's while it is here.
        _tool_descriptors.put(id(tool), (tool, key, described))
    return described


#: The last descriptor of each tool, by id, with the tool and what it was described from.
_tool_descriptors: Memo[int, tuple[Any, tuple[Any, ...], ToolDescriptor]] = Memo()


def text_hash(text: str) -> str:
    """``canonical_hash`` of a string, memoised: prompts and tool descriptions repeat every run."""
    return _text_hashes(text)


_text_hashes: Memo[str, str] = Memo(canonical_hash, limit=256)


#: Speed: schema hashes per ``args_schema`` class, then per (tool class, name, description).
#: ``convert_to_openai_tool`` rebuilds a pydantic subset model on every call (milliseconds per
#: construction); its output is a function of exactly those inputs. Kept per class
#: (``memo.py``), so schema classes created per run are not kept alive past the memo's bound.
_schema_hashes: ClassMemo[dict[tuple[type, str, str | None], str]] = ClassMemo(lambda schema: {})


def _schema_hash(tool: Any) -> str:
    schema = getattr(tool, "args_schema", None)
    if not isinstance(schema, type):  # a dict schema or none: not cacheable by identity
        return canonical_hash(_args_schema(tool))
    key = (type(tool), tool.name, tool.description)
    by_tool = _schema_hashes(schema)
    cached = by_tool.get(key)
    if cached is None:
        cached = by_tool[key] = canonical_hash(_args_schema(tool))
    return cached


def _args_schema(tool: Any) -> Any:
    # The parameters exactly as bound for the model (injected arguments such as the runtime
    # hidden, titles stripped), without the description: that has its own hash, so a reworded
    # description and a changed signature stay distinguishable.
    return convert_to_openai_tool(tool)["function"].get("parameters", {})


def build_info() -> dict[str, str]:
    """Which host binary built the agent; deliberately outside the fingerprint."""
    return {
        "image_digest": os.environ.get("DEER_FLOW_IMAGE_DIGEST") or _UNKNOWN,
        "git_commit": os.environ.get("DEER_FLOW_GIT_COMMIT") or _UNKNOWN,
        "host_version": __version__,
    }
