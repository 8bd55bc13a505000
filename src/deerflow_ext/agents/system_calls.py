"""The run config of the host's own model calls: kept out of every client stream.

Title, goal, memory and summarization prompts are the host's business. Invoked inside a
graph node, a model call inherits the run's callbacks, so LangGraph's ``messages`` stream
mode would forward its tokens to the client next to the agent's answer (a chat UI then shows
the title prompt's reply as a message). LangGraph skips any call tagged ``nostream``
(``langgraph.constants.TAG_NOSTREAM``); every system call carries that tag, plus its kind in
the metadata and the run name, so traces still show what it was. The ``events`` mode
(LangChain's callback events) excludes every run tagged ``SYSTEM_CALL_TAG`` and its children
(``agents/host.py``), so neither the calls nor their prompts reach it either.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from deerflow_extension_api import SystemOperationKind

__all__ = ["SYSTEM_CALL_TAG", "system_call_config"]

SYSTEM_CALL_TAG = "deerflow:system"


def system_call_config(kind: SystemOperationKind) -> RunnableConfig:
    """A fresh config per call (LangChain merges into it; a shared dict would be mutated)."""
    return {
        "tags": [TAG_NOSTREAM, SYSTEM_CALL_TAG],
        "metadata": {"deerflow_system_call": kind.value},
        "run_name": f"deerflow:{kind.value}",
    }
