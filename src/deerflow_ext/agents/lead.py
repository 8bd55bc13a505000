"""Agent construction: the host stack, the single final composition, the assembly report.

One builder serves the lead agent and subagents (``AgentScope`` tells them apart). The
order of work is fixed by the spec: build the host stack, call ``compose_middleware_stack``
exactly once at the end (the lead stack must be complete before extensions are placed in
it), create the graph, then report what was built. All of it happens inside
``bound_extensions(extensions)`` so anything resolving "the current extensions" during this
synchronous construction sees the run's snapshot, never a concurrently replaced global.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.composition.assembly import (
    build_info,
    describe_middleware,
    describe_tool,
    emit_agent_assembled,
    text_hash,
)
from deerflow_ext.extensions.composition.plugin_tools import merge_tools, plugin_tools, tool_source
from deerflow_ext.extensions.composition.stack import compose_middleware_stack, host_layers
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions, bound_extensions, build_extensions
from deerflow_ext.mcp_servers.origin import mcp_origin
from deerflow_ext.memo import DescriptorMemo
from deerflow_ext.skills import Skill, load_skill_tool, skills_prompt
from deerflow_ext.subagents.executor import SubagentBuilder
from deerflow_ext.subagents.task_tool import make_task_tool
from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    AgentBuildContext,
    AgentScope,
    HostPolicySnapshot,
    MiddlewareDescriptor,
)

from .context import RunContext
from .fused_nodes import bracket_model_node
from .middlewares import (
    ClarificationMiddleware,
    LLMErrorHandlingMiddleware,
    MemoryMiddleware,
    SandboxLeaseMiddleware,
    SubagentLimitMiddleware,
    SummarizationMiddleware,
    ThreadDataMiddleware,
    TitleMiddleware,
    TokenBudgetMiddleware,
    TokenUsageMiddleware,
    ToolErrorHandlingMiddleware,
)
from .models import create_chat_model, effective_model_name, model_name_for, public_model_parameters
from .node_fusion import fuse_host_node_hooks
from .policy import project_policy
from .prompts import LEAD_SYSTEM_PROMPT, SUBAGENT_SYSTEM_PROMPT
from .reuse import CompiledGraphs
from .tools import builtin_tools
from .tracing import install_inline_untraced_bookkeeping

__all__ = [
    "ASSEMBLY_NAMESPACE",
    "ModelFactory",
    "build_agent",
    "build_host_stack",
    "effective_policies",
    "make_lead_agent",
    "make_subagent",
    "subagent_builder",
    "subagent_task_tool",
]

ASSEMBLY_NAMESPACE = "deerflow"
ModelFactory = Callable[[str | None], BaseChatModel]

#: The last descriptor of each agent, handed out again for a construction that describes it
#: exactly (``memo.py``).
_descriptors: DescriptorMemo[AgentAssemblyDescriptor] = DescriptorMemo()

#: The host middlewares' descriptors, by scope, policy and presence of a memory, for the
#: configuration and classes they were made with (see :func:`_describe_stack`).
_host_descriptors: DescriptorMemo[tuple[MiddlewareDescriptor, ...]] = DescriptorMemo()


def build_host_stack(
    config: AppConfig,
    *,
    scope: AgentScope,
    model: BaseChatModel,
    policy: HostPolicySnapshot,
    memory: Any | None = None,
    system_models: Mapping[str, BaseChatModel] | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The host's own middlewares in ``HOST_STACK_ORDER`` (subagents skip the lead-only ones).

    ``system_models`` maps a system purpose (``title``, ``summarization``) to the model an
    operator put it on; a purpose missing from it runs on the agent's own ``model``.
    """
    lead = scope is AgentScope.LEAD
    system = system_models or {}
    # Each host middleware declares its own state schema; the list holds them all.
    stack: list[AgentMiddleware[Any, Any, Any]] = [
        ThreadDataMiddleware(),
        SandboxLeaseMiddleware(),
        LLMErrorHandlingMiddleware(config.retry.max_retries, config.retry.backoff_seconds),
        ToolErrorHandlingMiddleware(),
        SummarizationMiddleware(config.summarization, system.get("summarization", model)),
    ]
    if lead:
        stack += [
            TitleMiddleware(config.title, system.get("title", model)),
            MemoryMiddleware(memory, enabled=config.memory.enabled),
        ]
    stack += [TokenUsageMiddleware(), TokenBudgetMiddleware(policy)]
    if lead:
        stack.append(SubagentLimitMiddleware(policy.max_subagents_per_run or 0))
    stack.append(ClarificationMiddleware())
    return stack


def _describe_stack(
    stack: Sequence[AgentMiddleware[Any, Any, Any]],
    layers: Sequence[AgentMiddleware[Any, Any, Any]],
    config: AppConfig,
    scope: AgentScope,
    policy: HostPolicySnapshot,
    memory: Any | None,
) -> tuple[MiddlewareDescriptor, ...]:
    """Each middleware of ``stack`` described; ``layers`` are the host's among them, in order.

    What :func:`build_host_stack` makes describes alike for the same configuration, scope,
    policy and presence of a memory: each host middleware declares values of those alone,
    never of the models or the memory itself (a test holds it), so the host's descriptors
    are made once per configuration and handed out again. Only contributed middlewares are
    described at every construction. Why: describing the host's eleven middlewares was a
    fifth of what ten observing extensions cost a run.
    """
    host = _host_descriptors.descriptor(
        (scope, policy, memory is not None),
        same=(config,),
        inputs=tuple(map(type, layers)),
        build=lambda: tuple(map(describe_middleware, layers)),
    )
    described: list[MiddlewareDescriptor] = []
    at = 0
    for middleware in stack:
        if at < len(layers) and middleware is layers[at]:
            described.append(host[at])
            at += 1
        else:
            described.append(describe_middleware(middleware))
    return tuple(described)


def _describe_tool(tool: Any) -> Any:
    """A tool's descriptor; an MCP server's tool names its server and transport."""
    origin = mcp_origin(tool)
    if origin is None:
        return describe_tool(tool, tool_source(tool))
    return describe_tool(tool, "mcp", mcp_server=origin.server, mcp_transport=origin.transport)


def effective_policies(config: AppConfig, policy: HostPolicySnapshot, scope: AgentScope) -> dict[str, Any]:
    """The limits that shape this agent's behaviour, as plain JSON for the descriptor."""
    policies: dict[str, Any] = {
        "host_policy": _policy_values(policy),
        "summarization": config.summarization.model_dump(),
        "subagent_timeout_seconds": config.subagents.timeout_seconds,
    }
    if scope is AgentScope.LEAD:
        policies["title"] = config.title.model_dump()
        policies["memory"] = config.memory.model_dump()
        policies["goal"] = config.goal.model_dump()
    return policies


_POLICY_FIELDS = tuple(field.name for field in dataclasses.fields(HostPolicySnapshot))
_SCALARS = (bool, int, float, str, type(None))


def _policy_values(policy: HostPolicySnapshot) -> dict[str, Any]:
    """``dataclasses.asdict(policy)``, without its recursive deep copy when there is nothing
    to copy: the snapshot's fields are scalars. Speed: asdict was half the cost of
    ``effective_policies``, which runs on every observed construction."""
    values = {name: getattr(policy, name) for name in _POLICY_FIELDS}
    if type(policy) is HostPolicySnapshot and all(type(value) in _SCALARS for value in values.values()):
        return values
    return dataclasses.asdict(policy)


def _system_models(config: AppConfig, factory: ModelFactory) -> dict[str, BaseChatModel]:
    """The models of the system purposes an entry claims (``purposes:`` in ``models:``)."""
    models: dict[str, BaseChatModel] = {}
    for purpose in ("title", "summarization"):
        name = model_name_for(config, purpose)
        if name is not None:
            models[purpose] = factory(name)
    return models


def build_agent(
    config: AppConfig,
    *,
    scope: AgentScope,
    agent_name: str,
    extensions: LoadedExtensions | None = None,
    model_name: str | None = None,
    model_factory: ModelFactory | None = None,
    tools: Sequence[BaseTool] = (),
    system_prompt: str,
    checkpointer: Checkpointer | None = None,
    memory: Any | None = None,
    graphs: CompiledGraphs | None = None,
    store: BaseStore | None = None,
    enabled_skills: tuple[str, ...] = (),
) -> Any:
    """Build one agent graph; shared by the lead and subagent builders.

    ``enabled_skills`` names the skills the prompt lists (the assembly reports them).

    With ``graphs``, a graph compiled for an earlier construction of the same shape is
    reused, bound to this construction's stack and model (``agents/reuse.py``); everything
    else the spec asks of a construction (contributions, composition, the descriptor)
    happens here every time.
    """
    install_inline_untraced_bookkeeping()
    ext = extensions if extensions is not None else build_extensions()
    factory = model_factory or (lambda name: create_chat_model(config, name))
    with bound_extensions(ext):
        # Plugin model tools join the host's, after them: a host tool keeps its name.
        if ext.plugins:
            tools = merge_tools(tools, plugin_tools(ext, _tool_groups(config, scope)))
        model = factory(model_name)
        policy = project_policy(config, scope, agent_name)
        host = build_host_stack(
            config,
            scope=scope,
            model=model,
            policy=policy,
            memory=memory,
            system_models=_system_models(config, factory),
        )
        ctx = AgentBuildContext(
            scope=scope,
            agent_name=agent_name,
            model_name=model_name or effective_model_name(model),
            policy=policy,
        )
        # The single final composition point: nothing is appended after this.
        stack = compose_middleware_stack(host, extensions=ext, ctx=ctx)
        # What the graph is compiled over: the same stack, runs of host node hooks fused
        # (the host's layers as composed: one that carries a group is a copy of itself).
        layers = host_layers(stack)
        compiled = fuse_host_node_hooks(stack, layers)

        def compile_over(middleware: list[AgentMiddleware[Any, Any, Any]]) -> Any:
            graph = create_agent(
                model,
                list(tools),
                system_prompt=system_prompt,
                middleware=middleware,
                checkpointer=checkpointer,
                store=store,
                context_schema=RunContext,
            )
            return bracket_model_node(graph, middleware)

        graph = None
        if graphs is not None:
            graph = graphs.bind(
                compiled,
                model=model,
                tools=tools,
                system_prompt=system_prompt,
                checkpointer=checkpointer,
                store=store,
                compile=compile_over,
            )
        if graph is None:
            graph = compile_over(compiled)

        def describe() -> AgentAssemblyDescriptor:
            all_tools = [*tools, *(t for m in stack for t in getattr(m, "tools", ()) or ())]
            described_tools = tuple(map(_describe_tool, all_tools))
            middlewares = _describe_stack(stack, layers, config, scope, policy, memory)
            effective_model = effective_model_name(model)
            build = build_info()

            def new() -> AgentAssemblyDescriptor:
                params = public_model_parameters(config, model_name)
                return AgentAssemblyDescriptor(
                    namespace=ASSEMBLY_NAMESPACE,
                    agent_name=agent_name,
                    requested_model=model_name,
                    effective_model=effective_model,
                    model_parameters=params,
                    thinking_enabled=bool(params.get("thinking") or params.get("extended_thinking")),
                    reasoning_effort=params.get("reasoning_effort"),
                    # The configured prompt, before memory facts or any per-run context.
                    # Memoised per prompt string: the same prompt is hashed on every construction.
                    base_prompt_hash=text_hash(system_prompt),
                    tools=described_tools,
                    middlewares=middlewares,
                    deferred_tool_names=(),
                    enabled_skills=enabled_skills,
                    effective_policies=effective_policies(config, policy, scope),
                    build=build,
                )

            # The policy snapshot, model parameters and policies are functions of the
            # (frozen) config, the scope, the agent and the model name.
            return _descriptors.descriptor(
                agent_name,
                same=(config, *middlewares),
                inputs=(
                    scope,
                    model_name,
                    effective_model,
                    system_prompt,
                    described_tools,
                    enabled_skills,
                    tuple(build.items()),
                ),
                build=new,
            )

        emit_agent_assembled(ext, describe)
    return graph


def make_lead_agent(
    config: AppConfig,
    *,
    extensions: LoadedExtensions | None = None,
    model_name: str | None = None,
    model_factory: ModelFactory | None = None,
    checkpointer: Checkpointer | None = None,
    memory: Any | None = None,
    system_prompt: str = LEAD_SYSTEM_PROMPT,
    extra_tools: Sequence[BaseTool] = (),
    task_tool: BaseTool | None = None,
    graphs: CompiledGraphs | None = None,
    store: BaseStore | None = None,
    skills: Sequence[Skill] = (),
) -> Any:
    """The lead agent: built-in tools plus ``task`` (when subagents are enabled), and with
    ``skills`` their list in the prompt and the ``load_skill`` tool (``deerflow_ext.skills``).

    ``task_tool`` lets a long-lived caller (``AgentHost``) pass one it built once for the
    same config, model factory and model name; otherwise one is made here. ``graphs``:
    see :func:`build_agent`.
    """
    tools: list[BaseTool] = [*builtin_tools(), *extra_tools]
    if config.subagents.enabled:
        tools.append(task_tool or subagent_task_tool(config, model_factory=model_factory, model_name=model_name))
    if skills:
        tools.append(load_skill_tool(skills))
        system_prompt += skills_prompt(skills)
    return build_agent(
        config,
        scope=AgentScope.LEAD,
        agent_name="lead",
        extensions=extensions,
        model_name=model_name,
        model_factory=model_factory,
        tools=tools,
        system_prompt=system_prompt,
        checkpointer=checkpointer,
        memory=memory,
        graphs=graphs,
        store=store,
        enabled_skills=tuple(skill.name for skill in skills),
    )


def _tool_groups(config: AppConfig, scope: AgentScope) -> list[str] | None:
    """The plugin tool groups an agent of ``scope`` gets (None: every group): the lead's
    ``tool_groups``; a subagent's ``subagents.tool_groups``, else the lead's."""
    if scope is AgentScope.SUBAGENT and config.subagents.tool_groups is not None:
        return config.subagents.tool_groups
    return config.tool_groups


def make_subagent(
    config: AppConfig,
    *,
    extensions: LoadedExtensions,
    agent_name: str = "general-purpose",
    model_name: str | None = None,
    model_factory: ModelFactory | None = None,
    graphs: CompiledGraphs | None = None,
    extra_tools: Sequence[BaseTool] = (),
) -> Any:
    """A subagent graph: same builder, ``AgentScope.SUBAGENT``, no checkpointer; the built-in
    tools and ``extra_tools`` (the MCP servers', as DeerFlow's subagents get them), no ``task``."""
    return build_agent(
        config,
        scope=AgentScope.SUBAGENT,
        agent_name=agent_name,
        extensions=extensions,
        model_name=model_name,
        model_factory=model_factory,
        tools=[*builtin_tools(), *extra_tools] if extra_tools else builtin_tools(),
        system_prompt=SUBAGENT_SYSTEM_PROMPT,
        graphs=graphs,
    )


def subagent_builder(
    config: AppConfig,
    *,
    model_name: str | None = None,
    model_factory: ModelFactory | None = None,
    mcp_tools: Callable[[], Sequence[BaseTool]] | None = None,
) -> SubagentBuilder:
    """How a delegation builds its subagent: :func:`make_subagent` on this config and model.

    The wiring is explicit: the executor is handed this builder instead of importing the
    agent builders (which import the ``task`` tool, which imports the executor). The
    builder reuses its compiled subagent graphs across delegations (``agents/reuse.py``).
    ``mcp_tools`` answers the MCP servers' tools at each delegation (it starts nothing).
    """
    graphs = CompiledGraphs()

    def build(extensions: LoadedExtensions, agent_name: str) -> Any:
        return make_subagent(
            config,
            extensions=extensions,
            agent_name=agent_name,
            model_name=model_name,
            model_factory=model_factory,
            graphs=graphs,
            extra_tools=mcp_tools() if mcp_tools is not None else (),
        )

    return build


def subagent_task_tool(
    config: AppConfig,
    *,
    model_factory: ModelFactory | None = None,
    model_name: str | None = None,
    mcp_tools: Callable[[], Sequence[BaseTool]] | None = None,
) -> BaseTool:
    """The lead's ``task`` tool, delegating to subagents built by :func:`subagent_builder`."""
    builder = subagent_builder(config, model_name=model_name, model_factory=model_factory, mcp_tools=mcp_tools)
    return make_task_tool(config, build_subagent=builder)
