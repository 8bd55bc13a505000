"""State keys the host middlewares add to the agent state."""

from __future__ import annotations

from typing import Any, NotRequired

from langchain.agents.middleware import AgentState

__all__ = ["HostState"]


class HostState(AgentState[Any]):
    """``AgentState`` plus the host's keys; every one optional so old checkpoints load."""

    title: NotRequired[str | None]
    thread_data: NotRequired[dict[str, Any]]
    token_usage: NotRequired[dict[str, int]]
    run_token_usage: NotRequired[dict[str, Any]]
