"""``DeerFlowClient``: the lead agent in-process, without the Gateway.

The client is its own run worker, so it owns what the worker owns: it resolves the
extension snapshot once per run (the pinned set it was given, else the process-wide set),
allocates the task store, awaits ``on_task_start`` before the graph is built and
``on_task_stop`` after the run, whatever the outcome. There is no Gateway loop; when no
notification loop is registered the client registers the run's own loop for the duration
of the run, so fire-and-forget observations (compaction, cancelled system calls) are
delivered rather than dropped, and drains it before letting go.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Checkpointer

from deerflow_ext.agents.host import DEFAULT_GRAPH_STREAM_MODES, AgentHost, LeadRunRequest, LeadRunResult
from deerflow_ext.agents.lead import ModelFactory
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions, get_loaded_extensions
from deerflow_ext.extensions.notifications.lifecycle import task_bracket
from deerflow_ext.extensions.notifications.notification_loop import notification_loop
from deerflow_ext.skills import SkillShelf
from deerflow_extension_api import TaskInfo

__all__ = ["DeerFlowClient", "StreamEvent"]

logger = logging.getLogger(__name__)

StreamEvent = tuple[str, Any]
"""``(event, data)``: ``"metadata"`` first, then ``"updates"`` / ``"messages"`` / ``"values"``
as the graph streams, then ``"result"`` with the :class:`LeadRunResult`."""

_DRAIN_SECONDS = 2.0


class DeerFlowClient:
    """Run lead agents in this process; one client keeps its threads in one checkpointer."""

    def __init__(
        self,
        config: AppConfig | None = None,
        *,
        extensions: LoadedExtensions | None = None,
        checkpointer: Checkpointer | None = None,
        memory: Any | None = None,
        model_factory: ModelFactory | None = None,
        skills: SkillShelf | None = None,
    ) -> None:
        self.config = config if config is not None else AppConfig()
        self._extensions = extensions
        self.host = AgentHost(
            self.config,
            checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
            memory=memory,
            model_factory=model_factory,
            skills=skills,
        )

    @property
    def extensions(self) -> LoadedExtensions:
        """The pinned set, else the process-wide one *now* (resolved once per run)."""
        return self._extensions if self._extensions is not None else get_loaded_extensions()

    def run(self, prompt: str, thread_id: str | None = None, *, goal: str | None = None) -> LeadRunResult:
        """Blocking run; must not be called from a running event loop (use :meth:`arun`)."""
        return asyncio.run(self.arun(prompt, thread_id, goal=goal))

    async def arun(self, prompt: str, thread_id: str | None = None, *, goal: str | None = None) -> LeadRunResult:
        result: LeadRunResult | None = None
        async for event, data in self.astream(prompt, thread_id, goal=goal):
            if event == "result":
                result = data
        assert result is not None  # astream always ends with "result" or raises
        return result

    async def astream(
        self,
        prompt: str,
        thread_id: str | None = None,
        *,
        goal: str | None = None,
        stream_modes: Sequence[str] = DEFAULT_GRAPH_STREAM_MODES,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one run's events; the last one is ``("result", LeadRunResult)``.

        ``stream_modes`` are LangGraph's (``values`` is always streamed: the result is read from it).
        """
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        thread_id = thread_id or str(uuid.uuid4())
        run_id = str(uuid.uuid4())

        async def emit(event: str, data: Any) -> None:
            await queue.put((event, data))

        async def worker() -> None:
            try:
                await queue.put(("metadata", {"run_id": run_id, "thread_id": thread_id}))
                result = await self._run(prompt, thread_id, run_id, goal, emit, stream_modes)
                await queue.put(("result", result))
            finally:
                await queue.put(None)

        task = asyncio.create_task(worker())
        try:
            while (item := await queue.get()) is not None:
                yield item
            await task  # re-raise the run's exception, if any
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _run(
        self, prompt: str, thread_id: str, run_id: str, goal: str | None, emit: Any, stream_modes: Sequence[str]
    ) -> LeadRunResult:
        ext = self.extensions  # resolved once: store, hooks and construction share it
        task_store = ext.new_task_store(run_id)
        info = TaskInfo(task_id=run_id, run_id=run_id, thread_id=thread_id, kind="lead", agent_name="lead")
        owns_loop = notification_loop.loop is None
        if owns_loop:
            notification_loop.register(asyncio.get_running_loop())
        try:
            async with task_bracket(ext, task_store, info, where=f"run {run_id}") as task:
                await task.start()  # before the graph is built
                request = LeadRunRequest(
                    thread_id=thread_id,
                    run_id=run_id,
                    messages=({"role": "user", "content": prompt},),
                    goal=goal,
                    stream_modes=tuple(stream_modes),
                )
                return await self.host.run_lead(request, extensions=ext, task_store=task_store, emit=emit)
        finally:
            if owns_loop:
                await notification_loop.drain(_DRAIN_SECONDS)
                notification_loop.reset()

    async def aclose(self) -> None:
        await self.host.aclose()

    def close(self) -> None:
        asyncio.run(self.aclose())
