"""``AgentHost``: builds and runs lead agents for the Gateway and the embedded client.

The host runs the agent and its goal continuations; it does *not* notify task lifecycle
hooks. Those bracket the whole task, including persistence the host knows nothing about,
so the caller (the run worker, or ``DeerFlowClient``) owns them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer, Command

from deerflow_ext.config.schema import AppConfig, ModelPurpose
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions, get_loaded_extensions
from deerflow_ext.mcp_servers import McpServers
from deerflow_ext.memory.manager import MemoryManager
from deerflow_ext.persistence.checkpointer import run_writes
from deerflow_ext.skills import SkillShelf
from deerflow_ext.tokens import TokenUsage
from deerflow_extension_api import ExtensionData

from .context import build_run_context
from .goal import continuation_message, evaluate_goal
from .lead import ModelFactory, make_lead_agent, subagent_task_tool
from .messages import final_answer
from .models import model_name_for, shared_model_factory
from .reuse import CompiledGraphs
from .system_calls import SYSTEM_CALL_TAG
from .thread_state import ThreadStates

__all__ = [
    "DEFAULT_GRAPH_STREAM_MODES",
    "INTERRUPT_KEY",
    "AgentHost",
    "Emit",
    "LeadRunInput",
    "LeadRunRequest",
    "LeadRunResult",
    "TokenUsage",
    "final_answer",
]

Emit = Callable[[str, Any], Awaitable[None] | None]

DEFAULT_GRAPH_STREAM_MODES = ("messages", "updates", "values")
INTERRUPT_KEY = "__interrupt__"
"""Where LangGraph's stream (and LangGraph Platform's API) puts a pause's interrupts."""
DEFAULT_RECURSION_LIMIT = 200


@dataclass(frozen=True)
class LeadRunInput:
    """What a client asks of one lead run that reaches the graph as it was asked.

    The API's form of a run (``runtime.worker.LeadRunSpec``) and the host's
    (:class:`LeadRunRequest`) both carry it, so an option is declared here once and the
    run worker hands it on whole. ``checkpoint_id`` forks the thread from that checkpoint
    (the first graph pass only; goal continuations follow the fork); with no ``messages``
    as well, the graph re-runs what was next at that checkpoint (a UI's "regenerate").
    ``metadata`` is written to the run's checkpoints. ``command`` (LangGraph's ``Command``
    keys: ``resume``, ``update``, ``goto``) is the graph's input instead of ``messages``: it
    resumes a paused thread. The graph pauses before or after the nodes
    ``interrupt_before``/``interrupt_after`` name (``"*"``: all).
    """

    messages: tuple[dict[str, Any], ...]
    goal: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    subgraphs: bool = False
    checkpoint_id: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    durability: str | None = None
    command: Mapping[str, Any] | None = None
    interrupt_before: str | Sequence[str] | None = None
    interrupt_after: str | Sequence[str] | None = None


@dataclass(frozen=True)
class LeadRunRequest(LeadRunInput):
    """One lead run as the host executes it: the client's input, on a thread and a run.

    ``stream_modes`` are LangGraph stream modes (``values`` is always streamed: the result
    is read from it); with ``subgraphs`` an event from a subgraph reaches ``emit`` as
    ``"<mode>|<namespace>"``. ``metadata`` holds the run id, the assistant and the
    client's run metadata. ``events`` streams LangChain's callback events too
    (``emit("events", event)``). ``user_id`` is the principal the run is for: its tools
    and subagents read it from the runtime context (``user_id``, a host key).
    """

    thread_id: str = field(kw_only=True)
    run_id: str = field(kw_only=True)
    user_id: str | None = field(default=None, kw_only=True)
    stream_modes: tuple[str, ...] = DEFAULT_GRAPH_STREAM_MODES
    recursion_limit: int = DEFAULT_RECURSION_LIMIT
    events: bool = False


@dataclass(frozen=True)
class LeadRunResult:
    answer: str
    token_usage: TokenUsage
    title: str | None
    goal_met: bool | None
    continuations: int
    # The graph's state values the run ended with (its last ``values`` event): what a
    # ``/wait`` answers without reading the thread back from the checkpointer.
    values: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # The graph paused (a breakpoint, or ``interrupt()``): the thread waits for a resume.
    interrupted: bool = False


def _usage(values: Mapping[str, Any], run_id: str) -> TokenUsage:
    usage = values.get("run_token_usage") or {}
    return TokenUsage.of(usage) if usage.get("run_id") == run_id else TokenUsage()


class AgentHost:
    """One per Gateway / ``DeerFlowClient``: owns the model factory, memory and checkpointer."""

    def __init__(
        self,
        config: AppConfig,
        *,
        checkpointer: Checkpointer | None,
        memory: Any | None = None,
        model_factory: ModelFactory | None = None,
        model_name: str | None = None,
        extensions: LoadedExtensions | None = None,
        store: BaseStore | None = None,
        skills: SkillShelf | None = None,
        mcp_servers: McpServers | None = None,
    ) -> None:
        self.config = config
        # The skills folder and extensions_config.json the lead prompt lists skills from,
        # read again when they change (None: no skills).
        self.skills = skills
        # The MCP servers of extensions_config.json (mcp_servers/): their tools join each
        # lead run's and each subagent's; None (an embedded host) means none.
        self.mcp_servers = mcp_servers
        self.checkpointer = checkpointer
        # The LangGraph store the lead graph is compiled with (``runtime.store`` in a tool or
        # middleware): the Gateway's, which its ``/store`` routes serve too.
        self.store = store
        # The snapshot of the app that owns this host (a Gateway's); None means the
        # process-wide set, the spec's fallback for an embedded host.
        self.extensions = extensions
        # The lead model: the one asked for, else the entry claiming "lead", else the first.
        self.model_name = model_name if model_name is not None else model_name_for(config, "lead")
        self.model_factory: ModelFactory = model_factory or shared_model_factory(config)
        if memory is None and config.memory.enabled:
            memory = MemoryManager(config.memory, self.model_factory(self.purpose_model_name("memory")))
        self.memory = memory
        self._cached_task_tool: Any | None = None
        self._thread_states: ThreadStates | None = None
        # The lead graphs its runs share (agents/reuse.py); ThreadStates keeps its own.
        self._graphs = CompiledGraphs()

    @property
    def thread_states(self) -> ThreadStates:
        """Thread state and history through a lead graph built once, under this host's
        extensions (else the process-wide set), on first use (see ``thread_state``)."""
        if self._thread_states is None:
            self._thread_states = ThreadStates(
                lambda: self.make_lead_agent(
                    extensions=self.extensions if self.extensions is not None else get_loaded_extensions()
                ),
                self.checkpointer,
            )
        return self._thread_states

    def purpose_model_name(self, purpose: ModelPurpose) -> str | None:
        """The model ``purpose`` runs on: the entry claiming it, else the lead model."""
        claimed = model_name_for(self.config, purpose)
        return claimed if claimed is not None else self.model_name

    def make_lead_agent(
        self,
        *,
        extensions: LoadedExtensions,
        task_store: ExtensionData | None = None,
        reuse: bool = False,
        mcp_tools: Sequence[Any] = (),
    ) -> Any:
        """Build the lead graph (sync) under ``extensions``.

        ``task_store`` is not needed to build: the graph finds the live store on its runtime
        context. It is accepted so callers hand construction the same objects as the run.
        ``reuse`` shares the compiled graph with this host's earlier runs of the same shape
        (a :class:`~.reuse.BoundGraph`, run with ``astream``/``ainvoke``); without it the
        graph is compiled over this construction's own stack. ``mcp_tools``: the MCP servers'
        tools for this run (:meth:`run_lead` asks them of ``mcp_servers``).
        """
        del task_store
        return make_lead_agent(
            self.config,
            extensions=extensions,
            model_name=self.model_name,
            model_factory=self.model_factory,
            checkpointer=self.checkpointer,
            store=self.store,
            memory=self.memory,
            task_tool=self._task_tool(),
            skills=self.skills.enabled() if self.skills is not None else (),
            graphs=self._graphs if reuse else None,
            extra_tools=mcp_tools,
        )

    def _task_tool(self) -> Any:
        """The ``task`` tool, built once per host (not per run).

        Speed: ``StructuredTool.from_function`` infers a pydantic schema from the signature
        (~10 ms, a third of a bare lead run). The tool depends only on this host's config,
        model factory and model name, and is stateless: each call reads its run's snapshot,
        run id and thread from the runtime context. The graph is still built per run.
        """
        if self._cached_task_tool is None and self.config.subagents.enabled:
            self._cached_task_tool = subagent_task_tool(
                self.config,
                model_factory=self.model_factory,
                model_name=self.purpose_model_name("subagent"),
                mcp_tools=self.mcp_servers.ready_tools if self.mcp_servers is not None else None,
            )
        return self._cached_task_tool

    async def run_lead(
        self,
        request: LeadRunRequest,
        *,
        extensions: LoadedExtensions,
        task_store: ExtensionData | None,
        emit: Emit | None = None,
    ) -> LeadRunResult:
        """Build the agent, run it and its goal continuations, and report the outcome."""
        mcp_tools = await self.mcp_servers.tools() if self.mcp_servers is not None else ()
        graph = self.make_lead_agent(extensions=extensions, task_store=task_store, reuse=True, mcp_tools=mcp_tools)
        context = build_run_context(
            request.context,
            thread_id=request.thread_id,
            run_id=request.run_id,
            task_id=request.run_id,
            agent_name="lead",
            task_store=task_store,
            extensions=extensions,
            user_id=request.user_id,
        )
        run_config: dict[str, Any] = {
            "configurable": {"thread_id": request.thread_id},
            "recursion_limit": request.recursion_limit,
            "metadata": dict(request.metadata),
            "tags": list(request.tags),
        }
        first_config = run_config
        if request.checkpoint_id:
            first_config = {
                **run_config,
                "configurable": {**run_config["configurable"], "checkpoint_id": request.checkpoint_id},
            }
        inputs: Any = {"messages": list(request.messages)} if request.messages else None
        if request.command is not None:
            inputs = Command(**request.command)
        values, interrupted = await self._stream(graph, inputs, first_config, context, emit, request)

        goal_met: bool | None = None
        continuations = 0
        if request.goal and not interrupted:
            model = self.model_factory(self.purpose_model_name("goal"))
            evaluation = 0
            while True:
                evaluation += 1
                verdict = await evaluate_goal(
                    model,
                    request.goal,
                    values.get("messages", []),
                    evaluation=evaluation,
                    extensions=extensions,
                    task_store=task_store,
                )
                if verdict is None:  # the verdict call failed (logged): the answer stands, unjudged
                    break
                goal_met = verdict.met
                if verdict.met or continuations >= self.config.goal.max_continuations:
                    break
                continuations += 1
                follow_up = continuation_message(request.goal, verdict)
                if self.checkpointer is None:
                    # No checkpointer: the graph forgets between invocations, so carry state.
                    inputs = {**values, "messages": [*values.get("messages", []), follow_up]}
                else:
                    inputs = {"messages": [follow_up]}
                values, interrupted = await self._stream(graph, inputs, run_config, context, emit, request)
                if interrupted:
                    break

        return LeadRunResult(
            answer=final_answer(values.get("messages", [])),
            token_usage=_usage(values, request.run_id),
            title=values.get("title"),
            goal_met=goal_met,
            continuations=continuations,
            values=values,
            interrupted=interrupted,
        )

    async def _stream(
        self,
        graph: Any,
        inputs: Any,
        run_config: dict[str, Any],
        context: dict[str, Any],
        emit: Emit | None,
        request: LeadRunRequest,
    ) -> tuple[dict[str, Any], bool]:
        """Run one graph pass; its last values, and whether the graph paused.

        A pause shows in the stream as LangGraph's ``__interrupt__`` key: in ``values`` for
        ``interrupt()``, and only in ``updates`` for a breakpoint, so a run with breakpoints
        streams ``updates`` from the graph (the stream projection passes them on only to a
        client that asked for them)."""
        modes = list(dict.fromkeys([*request.stream_modes, "values"]))
        breakpoints = request.interrupt_before is not None or request.interrupt_after is not None
        if breakpoints and "updates" not in modes:
            modes.append("updates")
        options: dict[str, Any] = {"context": context, "stream_mode": modes, "subgraphs": request.subgraphs}
        if request.durability is not None:
            options["durability"] = request.durability
        if request.interrupt_before is not None:
            options["interrupt_before"] = request.interrupt_before
        if request.interrupt_after is not None:
            options["interrupt_after"] = request.interrupt_after
        values: dict[str, Any] = {}
        interrupted = False
        # The graph's checkpoint writes are all in when this ends (before the run is marked
        # ended); "sync" durability asks for each one before the next step, so it gets that.
        writes = run_writes(self.checkpointer) if request.durability != "sync" else nullcontext()
        async with writes:
            if request.events:
                items = _stream_with_events(graph, inputs, run_config, options, emit)
            else:
                items = graph.astream(inputs, run_config, **options)
            async for item in items:
                namespace: tuple[str, ...] = ()
                if request.subgraphs:
                    namespace, mode, chunk = item
                else:
                    mode, chunk = item
                if not namespace and mode in ("values", "updates"):
                    if INTERRUPT_KEY in chunk:
                        interrupted = True
                    if mode == "values":
                        values = chunk
                if emit is not None:
                    pending = emit("|".join((mode, *namespace)), chunk)
                    if inspect.isawaitable(pending):
                        await pending
        return values, interrupted

    async def aclose(self) -> None:
        """Flush pending memory extraction (on a thread: the engine's flush blocks); stop the
        MCP servers."""
        try:
            if self.memory is not None:
                await asyncio.to_thread(self.memory.flush)
        finally:
            if self.mcp_servers is not None:
                await self.mcp_servers.aclose()


async def _stream_with_events(
    graph: Any, inputs: Any, run_config: dict[str, Any], options: dict[str, Any], emit: Emit | None
) -> AsyncIterator[Any]:
    """The graph's stream items, run through LangChain's ``astream_events`` (v2) so that every
    callback event is emitted as an ``events`` chunk on the way, as LangGraph Platform's
    ``events`` stream mode sends them. The graph's own stream items are the root run's
    ``on_chain_stream`` chunks (the root has no parent).

    The host's own model calls (title, goal, summarization, memory) are left out: their
    prompts quote the conversation and are not the client's (README). Each carries
    ``SYSTEM_CALL_TAG``, which its child runs inherit, and LangChain drops every event of a
    run whose tags it excludes."""
    events = graph.astream_events(inputs, run_config, version="v2", exclude_tags=[SYSTEM_CALL_TAG], **options)
    async for event in events:
        if emit is not None:
            pending = emit("events", event)
            if inspect.isawaitable(pending):
                await pending
        if event.get("event") == "on_chain_stream" and not event.get("parent_ids"):
            yield event["data"]["chunk"]
