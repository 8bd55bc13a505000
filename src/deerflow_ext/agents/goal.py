"""Goal evaluation: a host-owned model call, observed as ``SystemOperationKind.GOAL``.

The verdict is JSON (``{"met": bool, "reason": str}``). A reply that does not parse counts
as *not met*: continuing is bounded by ``goal.max_continuations``, whereas stopping early on
garbage would silently drop the operator's goal. A verdict call that *fails* is another
matter: it is the host's call, not the run's, so it is one warning line naming the model,
no verdict (``None``), and the run ends with the answer it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.extensions.notifications.observe import observe_system_call
from deerflow_extension_api import (
    ContentKind,
    ExtensionData,
    SystemModelRequest,
    SystemOperationKind,
    provenance_kwargs,
)

from .models import effective_model_name
from .prompts import GOAL_CONTINUATION_PROMPT, render_goal_prompt, render_transcript
from .system_calls import log_failed_system_call, system_call_config

__all__ = ["GoalVerdict", "continuation_message", "evaluate_goal", "parse_verdict"]


@dataclass(frozen=True)
class GoalVerdict:
    met: bool
    reason: str


def parse_verdict(raw: object) -> GoalVerdict:
    text = raw if isinstance(raw, str) else str(raw)
    found = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        data = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("met"), bool):
        return GoalVerdict(met=False, reason=f"unparseable verdict: {text[:80]!r}")
    return GoalVerdict(met=data["met"], reason=str(data.get("reason", "")))


def continuation_message(goal: str, verdict: GoalVerdict) -> HumanMessage:
    # Stamped as the host's own (provenance): the user never wrote this message.
    return HumanMessage(
        content=GOAL_CONTINUATION_PROMPT.format(goal=goal, reason=verdict.reason or "no reason"),
        additional_kwargs=provenance_kwargs(ContentKind.MIDDLEWARE_INJECTION, "goal"),
    )


async def evaluate_goal(
    model: BaseChatModel,
    goal: str,
    conversation: Sequence[BaseMessage],
    *,
    evaluation: int,
    extensions: LoadedExtensions,
    task_store: ExtensionData | None,
) -> GoalVerdict | None:
    """Evaluation number ``evaluation`` (1-based) of ``goal`` against the conversation;
    None when the verdict call failed (logged)."""
    messages = [
        SystemMessage(content=render_goal_prompt(goal, evaluation=evaluation)),
        HumanMessage(content=render_transcript(conversation)),
    ]
    request = SystemModelRequest(messages=messages, model_name=effective_model_name(model))
    config = system_call_config(SystemOperationKind.GOAL)
    try:
        response: Any = await observe_system_call(
            extensions, task_store, SystemOperationKind.GOAL, request, lambda: model.ainvoke(messages, config=config)
        )
    except Exception as exc:
        consequence = "the goal is left unjudged, the run keeps its answer"
        log_failed_system_call(SystemOperationKind.GOAL, request.model_name or "?", exc, consequence)
        return None
    return parse_verdict(getattr(response, "content", response))
