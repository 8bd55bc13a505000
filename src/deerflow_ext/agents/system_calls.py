"""The host's own model calls: kept out of every client stream, and never the run's failure.

Title, goal, memory and summarization prompts are the host's business. Invoked inside a
graph node, a model call inherits the run's callbacks, so LangGraph's ``messages`` stream
mode would forward its tokens to the client next to the agent's answer (a chat UI then shows
the title prompt's reply as a message). LangGraph skips any call tagged ``nostream``
(``langgraph.constants.TAG_NOSTREAM``); every system call carries that tag, plus its kind in
the metadata and the run name, so traces still show what it was. The ``events`` mode
(LangChain's callback events) excludes every run tagged ``SYSTEM_CALL_TAG`` and its children
(``agents/host.py``), so neither the calls nor their prompts reach it either.

They are also the host's *aids*: a title, a summary, a goal verdict, remembered facts. The
user's answer exists (or, for a summary, can be had without one) whatever they do, so a
failing one is :func:`log_failed_system_call`'s one warning line naming the call and its
model, and the run goes on with its answer and outcome; it is never the run's failure.
"""

from __future__ import annotations

import logging

from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from deerflow_ext.exception_text import exception_text
from deerflow_extension_api import SystemOperationKind

__all__ = ["SYSTEM_CALL_TAG", "log_failed_system_call", "system_call_config"]

logger = logging.getLogger("deerflow_ext.system_calls")

SYSTEM_CALL_TAG = "deerflow:system"


def system_call_config(kind: SystemOperationKind) -> RunnableConfig:
    """A fresh config per call (LangChain merges into it; a shared dict would be mutated)."""
    return {
        "tags": [TAG_NOSTREAM, SYSTEM_CALL_TAG],
        "metadata": {"deerflow_system_call": kind.value},
        "run_name": f"deerflow:{kind.value}",
    }


def log_failed_system_call(kind: SystemOperationKind, model_name: str, exc: BaseException, consequence: str) -> None:
    """One WARNING line: which host call, on which model, why, and what the run does instead.

    The traceback only at DEBUG, as for a failed attempt of the agent's own model calls.
    """
    logger.warning(
        "the host's %s call on model %s failed (%s); %s",
        kind.value,
        model_name,
        exception_text(exc, one_line=True, limit=300),
        consequence,
        exc_info=exc if logger.isEnabledFor(logging.DEBUG) else None,
    )
