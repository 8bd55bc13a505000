from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    MiddlewareDescriptor,
    ToolDescriptor,
    canonical_hash,
    canonical_json,
)

TOOLS = (
    ToolDescriptor("search", "d1", "s1", "builtin"),
    ToolDescriptor("fetch", "d2", "s2", "mcp", mcp_server="web", mcp_transport="stdio"),
    ToolDescriptor("task", "d3", "s3", "builtin"),
    ToolDescriptor("calc", "d4", "s4", "extension"),
)
MIDDLEWARES = (
    MiddlewareDescriptor("TokenBudget", "host.budget", {"max_total_tokens": 1000}),
    MiddlewareDescriptor("ToolTimer", "acme.timer", {"slow_ms": 200}, extension="acme:install"),
)


def make(**changes: Any) -> AgentAssemblyDescriptor:
    fields: dict[str, Any] = {
        "namespace": "default",
        "agent_name": "lead",
        "requested_model": "alias",
        "effective_model": "gpt-4o-mini",
        "model_parameters": {"temperature": 0.2},
        "thinking_enabled": False,
        "reasoning_effort": None,
        "base_prompt_hash": "p" * 64,
        "tools": TOOLS,
        "middlewares": MIDDLEWARES,
        "deferred_tool_names": ("zeta", "alpha"),
        "enabled_skills": ("writing", "coding"),
        "effective_policies": {"max_subagents_per_run": 3},
        "build": {"image_digest": "unknown", "git_commit": "unknown"},
    }
    fields.update(changes)
    return AgentAssemblyDescriptor(**fields)


def test_fields_are_exactly_the_contract() -> None:
    assert [f.name for f in dataclasses.fields(AgentAssemblyDescriptor)] == [
        "namespace",
        "agent_name",
        "requested_model",
        "effective_model",
        "model_parameters",
        "thinking_enabled",
        "reasoning_effort",
        "base_prompt_hash",
        "tools",
        "middlewares",
        "deferred_tool_names",
        "enabled_skills",
        "effective_policies",
        "build",
    ]


def test_fingerprint_matches_documented_rendering() -> None:
    descriptor = make()
    expected = canonical_hash(
        {
            "namespace": "default",
            "agent_name": "lead",
            "effective_model": "gpt-4o-mini",
            "model_parameters": {"temperature": 0.2},
            "thinking_enabled": False,
            "reasoning_effort": None,
            "base_prompt_hash": "p" * 64,
            "tools": [dataclasses.asdict(t) for t in sorted(TOOLS, key=lambda t: t.name)],
            "middlewares": [dataclasses.asdict(m) for m in MIDDLEWARES],
            "deferred_tool_names": ["alpha", "zeta"],
            "enabled_skills": ["coding", "writing"],
            "effective_policies": {"max_subagents_per_run": 3},
        }
    )
    assert descriptor.fingerprint == expected
    assert len(descriptor.fingerprint) == 64


def test_fingerprint_is_cached_and_not_a_field() -> None:
    descriptor = make()
    assert descriptor.fingerprint is descriptor.fingerprint
    assert "fingerprint" not in {f.name for f in dataclasses.fields(descriptor)}
    assert "fingerprint" not in repr(descriptor)


def test_equal_descriptors_share_fingerprint() -> None:
    assert make() == make()
    assert make().fingerprint == make().fingerprint


def test_build_and_requested_model_excluded() -> None:
    base = make().fingerprint
    assert make(build={"git_commit": "abc"}).fingerprint == base
    assert make(build={}).fingerprint == base
    assert make(requested_model=None).fingerprint == base
    assert make(requested_model="other").fingerprint == base


def test_tools_skills_and_deferred_names_are_sorted() -> None:
    base = make().fingerprint
    assert make(tools=tuple(reversed(TOOLS))).fingerprint == base
    assert make(enabled_skills=("coding", "writing")).fingerprint == base
    assert make(deferred_tool_names=("alpha", "zeta")).fingerprint == base


def test_middleware_order_matters() -> None:
    assert make(middlewares=tuple(reversed(MIDDLEWARES))).fingerprint != make().fingerprint


def test_behavioural_changes_change_it() -> None:
    base = make().fingerprint
    changed_tool = (dataclasses.replace(TOOLS[0], schema_hash="s9"), *TOOLS[1:])
    changed_policy = (
        MIDDLEWARES[0],
        dataclasses.replace(MIDDLEWARES[1], policy_parameters={"slow_ms": 300}),
    )
    other_extension = (MIDDLEWARES[0], dataclasses.replace(MIDDLEWARES[1], extension="b:install"))
    variants = [
        make(tools=changed_tool),
        make(tools=TOOLS[:-1]),
        make(middlewares=changed_policy),
        make(middlewares=other_extension),
        make(effective_model="gpt-4o"),
        make(model_parameters={"temperature": 0.3}),
        make(thinking_enabled=True),
        make(reasoning_effort="high"),
        make(base_prompt_hash="q" * 64),
        make(enabled_skills=("coding",)),
        make(deferred_tool_names=()),
        make(effective_policies={}),
        make(agent_name="researcher"),
        make(namespace="other"),
    ]
    fingerprints = [v.fingerprint for v in variants]
    assert base not in fingerprints
    assert len(set(fingerprints)) == len(fingerprints)


def test_sequences_are_copied_into_tuples() -> None:
    tools = list(TOOLS)
    descriptor = make(tools=tools, enabled_skills=["b", "a"])
    tools.clear()
    assert descriptor.tools == TOOLS
    assert descriptor.enabled_skills == ("b", "a")


def test_middleware_descriptor_defaults() -> None:
    first, second = MiddlewareDescriptor("A", "m"), MiddlewareDescriptor("A", "m")
    assert first.policy_parameters == {}
    assert first.policy_parameters is not second.policy_parameters
    assert first.extension is None


def test_tool_descriptor_defaults() -> None:
    tool = ToolDescriptor("n", "d", "s", "builtin")
    assert (tool.mcp_server, tool.mcp_transport) == (None, None)


@given(st.permutations(TOOLS), st.permutations(("a", "b", "c")), st.permutations(("x", "y")))
def test_permutations_do_not_change_fingerprint(
    tools: list[ToolDescriptor], skills: list[str], deferred: list[str]
) -> None:
    reference = make(enabled_skills=("a", "b", "c"), deferred_tool_names=("x", "y")).fingerprint
    permuted = make(tools=tuple(tools), enabled_skills=tuple(skills), deferred_tool_names=tuple(deferred))
    assert permuted.fingerprint == reference


@given(st.lists(st.sampled_from(TOOLS), min_size=0, max_size=6), st.randoms())
def test_duplicate_tools_permutation_invariant(tools: list[ToolDescriptor], rnd: Any) -> None:
    shuffled = list(tools)
    rnd.shuffle(shuffled)
    assert make(tools=tuple(tools)).fingerprint == make(tools=tuple(shuffled)).fingerprint


SAME_NAME = (
    ToolDescriptor("search", "d1", "s2", "builtin"),
    ToolDescriptor("search", "d1", "s1", "mcp", mcp_server="web"),
    ToolDescriptor("search", "d0", "s9", "extension"),
)


@given(st.permutations((*SAME_NAME, *TOOLS)))
def test_tools_sharing_a_name_are_ordered_by_their_full_rendering(tools: list[ToolDescriptor]) -> None:
    # Distinct names sort by name alone; a tie is broken by the whole descriptor, so any
    # permutation still renders identically, and exactly as the documented key orders it.
    ordered = sorted((*SAME_NAME, *TOOLS), key=lambda t: (t.name, canonical_json(dataclasses.asdict(t))))
    expected = make(tools=tuple(ordered)).fingerprint
    assert make(tools=tuple(tools)).fingerprint == expected
    payload = make(tools=tuple(tools))._fingerprint_payload()
    assert list(payload["tools"]) == ordered  # type: ignore[call-overload]


def test_any_mapping_renders_as_the_dict_it_holds_and_anything_else_is_a_type_error() -> None:
    from types import MappingProxyType

    import pytest

    nested = {"limits": {"tokens": 10}, "names": ("a", "b")}
    assert make(effective_policies=MappingProxyType(nested)).fingerprint == make(effective_policies=nested).fingerprint
    proxied = MiddlewareDescriptor("Budget", "acme.mw", MappingProxyType({"cap": MappingProxyType({"usd": 5})}))
    plain = MiddlewareDescriptor("Budget", "acme.mw", {"cap": {"usd": 5}})
    assert make(middlewares=(proxied,)).fingerprint == make(middlewares=(plain,)).fingerprint
    for bad in ({"when": object()}, {"tags": {"a", "b"}}, {"ratio": float("nan")}):
        with pytest.raises(TypeError):
            make(effective_policies=bad)
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(TypeError):
        make(effective_policies=circular)
