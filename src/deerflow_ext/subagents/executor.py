"""Running one subagent: its own event loop on a worker thread, bracketed by task hooks.

A subagent runs on its own loop so a long delegation never blocks the parent run's loop
(which also carries its stream). It is bound to the *parent run's* extension snapshot,
passed in at construction: by the time the lead delegates, the build-time ContextVar has
long exited, and the process-wide set may have been replaced since the run began.

Hook timing (spec, Lifecycle and Observers): ``on_task_start`` is awaited before the
subagent's first step; ``on_task_stop`` runs in the cleanup path *after* the sandbox lease
is released, whatever the outcome. A ``KeyboardInterrupt``/``SystemExit`` from extension code
ends here, attributed (``extensions/boundary/exits.py``): it must not end this worker thread's loop,
nor travel back into the parent run. Without a parent ``run_id`` (direct factory calls, a
standalone LangGraph server) both hooks are skipped with a debug line.

How the subagent's graph is built is not this module's business: whoever wires the ``task``
tool (``agents.lead.subagent_builder``) passes a :data:`SubagentBuilder`, so the executor
never imports the agent builders that import it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage

from deerflow_ext.agents.context import build_run_context
from deerflow_ext.agents.messages import final_answer
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.boundary.exits import PROCESS_EXITS, contain_exit
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions, get_loaded_extensions
from deerflow_ext.extensions.notifications.lifecycle import task_bracket
from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

from .sandbox import SandboxPool, sandbox_pool

__all__ = ["SubagentBuilder", "SubagentExecutor", "SubagentResult"]

#: Builds a subagent's graph under a run's extension snapshot: ``(extensions, agent_name) -> graph``.
SubagentBuilder = Callable[[LoadedExtensions, str], Any]

logger = logging.getLogger(__name__)

_workers = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="deerflow-subagent")


@dataclass(frozen=True)
class SubagentResult:
    task_id: str
    outcome: TaskOutcome
    answer: str
    error: str | None = None


class SubagentExecutor:
    """Executes one delegated task; construct one per delegation."""

    def __init__(
        self,
        config: AppConfig,
        *,
        build_subagent: SubagentBuilder,
        extensions: LoadedExtensions | None,
        parent_run_id: str | None,
        thread_id: str | None,
        tool_call_id: str | None = None,
        agent_name: str = "general-purpose",
        pool: SandboxPool | None = None,
        user_id: str | None = None,
    ) -> None:
        self.config = config
        self.build_subagent = build_subagent
        # Bound now: the snapshot the parent run published, else the process-wide set.
        self.extensions = extensions if extensions is not None else get_loaded_extensions()
        self.parent_run_id = parent_run_id
        self.thread_id = thread_id
        self.tool_call_id = tool_call_id
        self.agent_name = agent_name
        self.user_id = user_id  # the parent run's principal: the subagent acts for the same user
        self.pool = pool if pool is not None else sandbox_pool
        self.task_id = f"subagent-{uuid.uuid4().hex}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[SubagentResult] | None = None
        self._started = threading.Event()

    # -- entry points ----------------------------------------------------------------------

    def execute(self, task: str) -> SubagentResult:
        """Run to completion on a worker thread with a fresh loop; blocks the caller."""
        return _workers.submit(self._thread_main, task).result()

    async def aexecute(self, task: str) -> SubagentResult:
        """Await the worker thread without blocking this loop; cancelling aborts the subagent."""
        future = asyncio.wrap_future(_workers.submit(self._thread_main, task))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self._cancel()
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout=5.0)
            except (asyncio.CancelledError, Exception):  # already cancelling: the result is moot
                pass
            raise

    def _cancel(self) -> None:
        self._started.wait(timeout=5.0)
        loop, main = self._loop, self._main
        if loop is not None and main is not None and not loop.is_closed():
            loop.call_soon_threadsafe(main.cancel)

    def _thread_main(self, task: str) -> SubagentResult:
        async def main() -> SubagentResult:
            self._loop = asyncio.get_running_loop()
            self._main = asyncio.current_task()
            self._started.set()
            return await self._run(task)

        try:
            return asyncio.run(main())
        except asyncio.CancelledError:
            return SubagentResult(self.task_id, TaskOutcome.ABORTED, "", "cancelled")
        finally:
            self._started.set()

    # -- the task --------------------------------------------------------------------------

    def _info(self) -> TaskInfo:
        return TaskInfo(
            task_id=self.task_id,
            run_id=self.parent_run_id or "",
            thread_id=self.thread_id or "",  # DeerFlow's value for a subagent without a thread
            kind="subagent",
            parent_task_id=self.parent_run_id,
            agent_name=self.agent_name,
            user_id=self.user_id,
        )

    async def _run(self, task: str) -> SubagentResult:
        ext = self.extensions
        # The store's scope is the delegating tool call when there is one; identity is task_id.
        task_store: ExtensionData | None = ext.new_task_store(self.tool_call_id or self.task_id)
        info = self._info()
        where = f"subagent {self.task_id}"
        if self.parent_run_id is None:
            logger.debug("subagent %s has no parent run_id; skipping task lifecycle hooks", self.task_id)
        notified = task_store if self.parent_run_id is not None else None

        outcome, answer, error = TaskOutcome.FAILED, "", None
        # on_task_stop runs after the lease is released, whatever the outcome.
        async with task_bracket(ext, notified, info, where=where) as bracket:
            await bracket.start()
            lease = self.pool.acquire(f"subagent:{self.task_id}")
            try:
                answer = await asyncio.wait_for(
                    self._invoke(task, task_store, lease), timeout=self.config.subagents.timeout_seconds
                )
                outcome = TaskOutcome.COMPLETED
            except asyncio.CancelledError:
                outcome, error = TaskOutcome.ABORTED, "cancelled"
                raise
            except TimeoutError:
                error = f"timed out after {self.config.subagents.timeout_seconds}s"
            except Exception as exc:
                logger.exception("subagent %s failed", self.task_id)
                error = f"{type(exc).__name__}: {exc}"
            except PROCESS_EXITS as exc:  # from extension code the host does not wrap
                error = contain_exit(exc, where=where)
            finally:
                self.pool.release(lease)
                bracket.outcome = outcome
        return SubagentResult(self.task_id, outcome, answer, error)

    async def _invoke(self, task: str, task_store: ExtensionData | None, lease: Any) -> str:
        graph = self.build_subagent(self.extensions, self.agent_name)
        context = build_run_context(
            None,
            thread_id=self.thread_id,
            run_id=self.parent_run_id,
            task_id=self.task_id,
            agent_name=self.agent_name,
            task_store=task_store,
            extensions=self.extensions,
            sandbox_lease=lease,
            user_id=self.user_id,
        )
        state = await graph.ainvoke({"messages": [HumanMessage(content=task)]}, context=context)
        return final_answer(state.get("messages", []))
