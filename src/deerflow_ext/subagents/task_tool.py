"""The ``task`` tool: how the lead agent delegates to a subagent.

The tool reads the run's extension snapshot back from the runtime context with
``resolve_run_extensions`` (type-checked, since callers can merge into that context) and
hands it to the executor at construction, so the subagent is built from the same extension
generation as the lead even if the process-wide set was replaced mid-run.
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from deerflow_ext.agents.context import context_value
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import resolve_run_extensions

from .executor import SubagentBuilder, SubagentExecutor, SubagentResult

__all__ = ["TASK_TOOL_DESCRIPTION", "make_task_tool"]

TASK_TOOL_DESCRIPTION = (
    "Delegate a self-contained task to a subagent and get its answer. "
    "`description` is a short label; `prompt` is the full instruction."
)


def _render(result: SubagentResult) -> str:
    if result.error is not None:
        return f"Subagent {result.outcome.value}: {result.error}"
    return result.answer


def make_task_tool(config: AppConfig, *, build_subagent: SubagentBuilder) -> BaseTool:
    """The ``task`` tool; ``build_subagent`` builds each delegation's graph (the agent
    builders pass it: this package does not import them)."""

    def executor(runtime: ToolRuntime[dict[str, Any], Any]) -> SubagentExecutor:
        return SubagentExecutor(
            config,
            build_subagent=build_subagent,
            extensions=resolve_run_extensions(runtime.context),
            parent_run_id=context_value(runtime, "run_id"),
            thread_id=context_value(runtime, "thread_id"),
            tool_call_id=runtime.tool_call_id,
            user_id=context_value(runtime, "user_id"),
        )

    def task(description: str, prompt: str, runtime: ToolRuntime[dict[str, Any], Any]) -> str:
        return _render(executor(runtime).execute(prompt or description))

    async def atask(description: str, prompt: str, runtime: ToolRuntime[dict[str, Any], Any]) -> str:
        return _render(await executor(runtime).aexecute(prompt or description))

    return StructuredTool.from_function(func=task, coroutine=atask, name="task", description=TASK_TOOL_DESCRIPTION)
