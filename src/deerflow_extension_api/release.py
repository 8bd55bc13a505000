"""Canonical serialisation shared by the host and extensions.

The host hashes policies, prompts and message content with these functions and exports
them so an extension computes byte-identical hashes. A hash is only useful if both
sides agree on it, so these are deliberately strict: anything that JSON cannot
represent exactly raises ``TypeError`` rather than falling back to ``repr()``, whose
output depends on memory addresses, set iteration order and ``__repr__`` whims.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["ReleasePolicyProvider", "canonical_hash", "canonical_json", "collect_release_policies"]


@runtime_checkable
class ReleasePolicyProvider(Protocol):
    """A middleware whose behaviour depends on parameters a release should record.

    :func:`collect_release_policies` reads the declaration of every middleware in a stack
    and the host hashes them into the agent's fingerprint, so changing a parameter shows
    up as a new release. Values must be JSON-serialisable; hash long text rather than
    embedding it. The default declares nothing.
    """

    def release_policy_parameters(self) -> dict[str, object]:
        return None  # type: ignore[return-value]  # DeerFlow's default: declares nothing


def canonical_json(value: object) -> str:
    """Serialise *value* to JSON with sorted keys and no insignificant whitespace.

    Semantics are exactly those of ``json.dumps(value, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False, allow_nan=False)``: dicts, lists,
    tuples, strings, numbers, booleans and ``None``. Tuples are JSON arrays, the same as
    lists, so ``(1, 2)`` and ``[1, 2]`` hash alike; a frozen snapshot that holds a tuple
    where a live object held a list therefore keeps its hash. Dict keys should be
    strings: ``json`` coerces numeric keys to strings, so ``{1: x}`` and ``{"1": x}``
    collide.

    Raises ``TypeError`` for every value it cannot serialise, including ``set``,
    arbitrary objects, non-finite floats and circular references (which ``json``
    itself reports as ``ValueError``): one exception type to catch for "not
    canonicalisable".
    """
    return _dumps(value, None)


def canonical_hash(value: object) -> str:
    """Return the SHA-256 hex digest of the UTF-8 encoding of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def _dumps(value: object, default: Callable[[Any], object] | None) -> str:
    """:func:`canonical_json`, with ``json``'s ``default`` hook for callers in this package.

    ``default`` renders objects ``json`` does not know as plain JSON shapes *inside* the one
    C-encoder pass, instead of a Python pre-pass over the whole value; it must raise
    ``TypeError`` for anything it does not render, as ``json`` does.
    """
    try:
        return json.dumps(
            value,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            default=default,
        )
    except ValueError as exc:
        raise TypeError(f"value is not canonically serialisable: {exc}") from exc


def collect_release_policies(middlewares: Iterable[object]) -> dict[str, dict[str, object]]:
    """Collect every ``release_policy_parameters()`` declaration in a stack.

    Keys are class names in stack order. The second and later declarers with the same
    class name get ``Name#2``, ``Name#3``, ...; numbering counts declarers only, since
    middlewares without a callable ``release_policy_parameters`` are skipped. A
    declaration that raises (or returns something other than a mapping) is recorded as
    ``{"error": "<ExceptionTypeName>"}`` rather than dropped, so a broken declaration
    shows up in the fingerprint instead of hiding a policy change. Values are not
    checked for serialisability here; :func:`canonical_json` does that when hashing.
    """
    policies: dict[str, dict[str, object]] = {}
    seen: dict[str, int] = {}
    for middleware in middlewares:
        try:
            declare = getattr(middleware, "release_policy_parameters", None)
        except Exception:  # a property that raises is not a declaration
            continue
        if not callable(declare):
            continue
        name = type(middleware).__name__
        count = seen.get(name, 0) + 1
        seen[name] = count
        key = name if count == 1 else f"{name}#{count}"
        try:
            declared = declare()
        except Exception as exc:
            policies[key] = {"error": type(exc).__name__}
            continue
        if not isinstance(declared, Mapping):
            policies[key] = {"error": TypeError.__name__}
            continue
        policies[key] = {str(k): v for k, v in declared.items()}
    return policies
