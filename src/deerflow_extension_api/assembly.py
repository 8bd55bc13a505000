"""Descriptors of an assembled agent, and their fingerprint.

Agent construction decides the effective model, renders the prompt, filters tools and
composes middleware in one synchronous call; none of it is recoverable afterwards. The
descriptor records those decisions and its ``fingerprint`` answers one question: did
anything about how this agent behaves change?
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._normalize import as_tuple, frozen_mapping
from .release import _dumps

if TYPE_CHECKING:
    from .data import ExtensionData

__all__ = [
    "AgentAssemblyDescriptor",
    "AgentAssemblyObserver",
    "MiddlewareDescriptor",
    "ToolDescriptor",
]

# Fields left out of the fingerprint: ``build`` so a redeploy of an unchanged
# configuration keeps every fingerprint, ``requested_model`` because only
# ``effective_model`` reaches the provider.
_NOT_FINGERPRINTED = frozenset({"build", "requested_model"})
_MAPPING_FIELDS = ("model_parameters", "effective_policies", "build")


@dataclass(frozen=True, slots=True)
class ToolDescriptor:
    """A tool as the model sees it, by hashes of what it is told.

    ``source`` says where the tool came from (for example ``"builtin"``, ``"mcp"``,
    ``"extension"``); MCP tools also name their server and transport.
    """

    name: str
    description_hash: str
    schema_hash: str
    source: str
    mcp_server: str | None = None
    mcp_transport: str | None = None


@dataclass(frozen=True, slots=True)
class MiddlewareDescriptor:
    """One middleware in the composed stack.

    A contributed middleware is described by the class it wraps, and ``extension``
    names the contributing entry point, so two extensions' middleware never collapse
    into one entry. ``policy_parameters`` is a read-only copy (nested dicts and lists
    included): the fingerprint that hashes it must not go stale when the caller later
    changes the mapping it passed.
    """

    name: str
    module: str
    policy_parameters: Mapping[str, Any] = field(default_factory=dict)
    extension: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy_parameters", frozen_mapping(self.policy_parameters))


def _plain(value: object) -> object:
    """Render descriptors and mappings as the plain JSON shapes they are hashed as.

    Called by ``json`` (its ``default`` hook) only for what it cannot encode itself, so the
    fingerprint's ~240 values are walked once, by the C encoder. Lists, tuples, dicts and
    scalars never reach here; anything this does not render raises ``TypeError``.
    """
    names = _DESCRIPTOR_FIELDS.get(type(value))
    if names is not None:
        return {name: getattr(value, name) for name in names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_DESCRIPTOR_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in (ToolDescriptor, MiddlewareDescriptor)
}


def _tool_key(tool: ToolDescriptor) -> tuple[str, str]:
    # The name orders tools; the full rendering only breaks ties between duplicates,
    # so any permutation of the same tools sorts identically.
    return (tool.name, _dumps(tool, _plain))


def _sorted_tools(tools: tuple[ToolDescriptor, ...]) -> list[ToolDescriptor]:
    """``tools`` in :func:`_tool_key` order.

    When the names are distinct strings the name alone decides that order, so the full
    renderings (a JSON serialisation per tool) are only computed to break real ties.
    """
    names = [tool.name for tool in tools]
    if all(type(name) is str for name in names) and len(set(names)) == len(names):
        return sorted(tools, key=_tool_name)
    return sorted(tools, key=_tool_key)


def _tool_name(tool: ToolDescriptor) -> str:
    return tool.name


@dataclass(frozen=True)
class AgentAssemblyDescriptor:
    """What the host decided when it built one agent.

    The sequence fields are copied into tuples, and the mapping fields into read-only
    copies (nested dicts and lists included), at construction so the descriptor cannot
    change under an observer and its fingerprint cannot go stale when the caller later
    mutates what it passed. ``base_prompt_hash`` hashes the system prompt as
    configured and rendered for the agent, before per-run dynamic context is
    injected, so two runs of an unchanged configuration share a fingerprint.

    ``fingerprint`` is computed once, in ``__post_init__``, and stored on a private
    attribute that is not a dataclass field (so it is not part of ``fields()``,
    ``repr`` or equality). Eager rather than lazy, because (1) a policy value that
    cannot be serialised then fails where the host builds the descriptor and can
    blame the middleware, instead of inside whichever observer reads the fingerprint
    first, and (2) the value is fixed by the descriptor's contents at construction, not
    by when someone first asked. The host builds descriptors only when an assembly
    observer is registered, so the hash is never computed for nobody. The class is
    not ``slots=True`` because a slotted dataclass has no room for a non-field
    attribute.
    """

    namespace: str
    agent_name: str
    requested_model: str | None
    effective_model: str
    model_parameters: Mapping[str, Any]
    thinking_enabled: bool
    reasoning_effort: str | None
    base_prompt_hash: str
    tools: tuple[ToolDescriptor, ...]
    middlewares: tuple[MiddlewareDescriptor, ...]
    deferred_tool_names: tuple[str, ...]
    enabled_skills: tuple[str, ...]
    effective_policies: Mapping[str, Any]
    build: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tools", "middlewares", "deferred_tool_names", "enabled_skills"):
            object.__setattr__(self, name, as_tuple(getattr(self, name)))
        for name in _MAPPING_FIELDS:
            object.__setattr__(self, name, frozen_mapping(getattr(self, name)))
        payload = _dumps(self._fingerprint_payload(), _plain)
        object.__setattr__(self, "_fingerprint", hashlib.sha256(payload.encode("utf-8")).hexdigest())

    def _fingerprint_payload(self) -> dict[str, object]:
        """The hashed fields, still holding descriptors (``_plain`` renders them)."""
        payload: dict[str, object] = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _NOT_FINGERPRINTED
        }
        # Assembly order of tools and skills is incidental; middleware order decides
        # what wraps what, so it stays in stack order.
        payload["tools"] = _sorted_tools(self.tools)
        payload["deferred_tool_names"] = sorted(self.deferred_tool_names)
        payload["enabled_skills"] = sorted(self.enabled_skills)
        return payload

    @property
    def fingerprint(self) -> str:
        """SHA-256 over every field except ``build`` and ``requested_model``.

        Not a deployment id: it deliberately ignores ``build``; compare ``build`` to
        know whether the host binary changed.
        """
        value: str = self.__dict__["_fingerprint"]
        return value


@runtime_checkable
class AgentAssemblyObserver(Protocol):
    """Told about every agent the host builds.

    The only synchronous contribution: agent construction is synchronous, with no loop
    to await on. It must be cheap and must not block; an exception is logged and the
    agent is built anyway.
    """

    def on_agent_assembled(self, app_store: ExtensionData, descriptor: AgentAssemblyDescriptor) -> None:
        return None
