"""Summarization: fold older messages into one summary, and report the mapping.

The compaction event is the only record of which messages became the summary, so it is
captured at the only moment that mapping exists: each message about to be removed is hashed
(``canonical_hash(message.content)``, never ``str()``) just before the summary call, and the
event is submitted fire-and-forget after it. With no compaction observer registered the
hashing pass is skipped entirely. Only the async path is observed; the sync path exists for
direct ``invoke`` callers and reports nothing, as the spec says of ``compact_state``.

A failed summary call compacts nothing: one warning line names the model, the model turn
goes on with the whole history (the next turn tries again), and the run is not failed by
the host's own bookkeeping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from deerflow_ext.config.schema import SummarizationConfig
from deerflow_ext.extensions.contract.snapshot import resolve_run_extensions
from deerflow_ext.extensions.notifications.observe import observe_system_call, submit_compaction, wants_compaction
from deerflow_extension_api import (
    CompactionEvent,
    ContentKind,
    SystemModelRequest,
    SystemOperationKind,
    canonical_hash,
    provenance_kwargs,
    task_store_from_runtime,
)

from ..context import context_value
from ..messages import content_text
from ..models import effective_model_name
from ..prompts import SUMMARY_MESSAGE_PREFIX, render_summary_prompt
from ..system_calls import log_failed_system_call, system_call_config
from .state import HostState
from .system_model import SystemModelMiddleware

__all__ = ["SUMMARIZATION_TRANSFORM", "SUMMARIZATION_VERSION", "SummarizationMiddleware", "split_for_summary"]

logger = logging.getLogger(__name__)

SUMMARIZATION_TRANSFORM = "summarization"
SUMMARIZATION_VERSION = "1"


def split_for_summary(messages: Sequence[AnyMessage], keep: int) -> tuple[list[AnyMessage], list[AnyMessage]]:
    """``(to_remove, kept)``; the cut never orphans a ToolMessage from its AI tool call."""
    cut = max(0, len(messages) - keep)
    while 0 < cut < len(messages) and isinstance(messages[cut], ToolMessage):
        cut -= 1
    # An AI message whose tool calls would be answered after the cut stays with them.
    before = messages[cut - 1] if cut > 0 else None
    if isinstance(before, AIMessage) and before.tool_calls:
        cut -= 1
    return list(messages[:cut]), list(messages[cut:])


class SummarizationMiddleware(SystemModelMiddleware[SummarizationConfig]):
    """Replaces older messages with one summary once the thread exceeds ``trigger_messages``."""

    released = ("enabled", "trigger_messages", "keep_messages")

    def _plan(self, state: HostState) -> tuple[list[AnyMessage], list[AnyMessage]] | None:
        if not self.config.enabled:
            return None
        messages = state["messages"]
        if len(messages) <= self.config.trigger_messages:
            return None
        to_remove, kept = split_for_summary(messages, self.config.keep_messages)
        return (to_remove, kept) if to_remove else None

    @staticmethod
    def _update(summary: HumanMessage, kept: list[AnyMessage]) -> dict[str, Any]:
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept]}

    @staticmethod
    def _summary_message(response: Any) -> HumanMessage:
        # Stamped as the host's own (provenance): the user never wrote this message.
        return HumanMessage(
            content=f"{SUMMARY_MESSAGE_PREFIX}\n{content_text(getattr(response, 'content', response))}",
            additional_kwargs=provenance_kwargs(ContentKind.MIDDLEWARE_INJECTION, "summarization"),
        )

    def _not_compacted(self, exc: Exception) -> None:
        log_failed_system_call(
            SystemOperationKind.SUMMARIZATION,
            effective_model_name(self.model),
            exc,
            "nothing is compacted this turn, the run goes on with the whole history",
        )

    def before_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        plan = self._plan(state)
        if plan is None:
            return None
        to_remove, kept = plan
        try:
            response = self.model.invoke(
                render_summary_prompt(to_remove), config=system_call_config(SystemOperationKind.SUMMARIZATION)
            )
        except Exception as exc:
            self._not_compacted(exc)
            return None
        return self._update(self._summary_message(response), kept)

    async def abefore_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        plan = self._plan(state)
        if plan is None:
            return None
        to_remove, kept = plan
        ext = resolve_run_extensions(getattr(runtime, "context", None))
        task_store = task_store_from_runtime(runtime)
        hashing = wants_compaction(ext)
        # Hash now: after the summary call these messages are gone from state.
        source_hashes = tuple(canonical_hash(m.content) for m in to_remove) if hashing else ()
        prompt = render_summary_prompt(to_remove)
        request = SystemModelRequest(messages=prompt, model_name=effective_model_name(self.model))
        config = system_call_config(SystemOperationKind.SUMMARIZATION)
        try:
            response = await observe_system_call(
                ext,
                task_store,
                SystemOperationKind.SUMMARIZATION,
                request,
                lambda: self.model.ainvoke(prompt, config=config),
            )
        except Exception as exc:
            self._not_compacted(exc)
            return None
        summary = self._summary_message(response)
        if hashing:
            submit_compaction(
                ext,
                CompactionEvent(
                    transform_kind=SUMMARIZATION_TRANSFORM,
                    transform_version=SUMMARIZATION_VERSION,
                    source_content_hashes=source_hashes,
                    output_content_hash=canonical_hash(summary.content),
                    compacted_message_count=len(to_remove),
                    kept_message_count=len(kept),
                    kept_content_hashes=tuple(canonical_hash(m.content) for m in kept),
                    task_id=context_value(runtime, "task_id"),
                    run_id=context_value(runtime, "run_id"),
                    thread_id=context_value(runtime, "thread_id"),
                    emitted_at=time.time(),
                ),
            )
        logger.debug("summarised %d message(s), kept %d", len(to_remove), len(kept))
        return self._update(summary, kept)
