"""The embedded chat model: deterministic, offline, and good enough to drive every host path.

With ``models:`` empty the host still has to exercise tool calls, subagents, title, goal,
memory and summarization, so this model answers by rules instead of by weights:

- the last human message ``delegate: <task>`` calls the ``task`` tool;
- ``use <tool> <json>`` calls that tool with those arguments;
- right after a tool result it answers with a final text quoting that result;
- a host system prompt (recognised by the marker lines in ``agents.prompts``) gets output in
  the shape the host parses: a title, a goal verdict, a JSON list of facts, a summary;
- anything else gets a deterministic answer derived from the prompt.

Every reply has a fresh uuid id: checkpointed threads merge messages by id, so a repeated
answer with a derived id would overwrite the previous one instead of being appended.
``fail_times`` raises :class:`TransientModelError` on the first N calls so the retry layer
can be tested without a flaky provider.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from .messages import content_text
from .prompts import GOAL_MARKER, MEMORY_MARKER, SUMMARY_MARKER, TITLE_MARKER

__all__ = ["EMBEDDED_MODEL_NAME", "EmbeddedChatModel", "TransientModelError", "count_tokens"]

EMBEDDED_MODEL_NAME = "deerflow-embedded"

_DELEGATE = re.compile(r"^\s*delegate:\s*(?P<task>.+)$", re.IGNORECASE | re.DOTALL)
_USE = re.compile(r"^\s*use\s+(?P<tool>[\w.-]+)\s*(?P<args>\{.*\})?\s*$", re.IGNORECASE | re.DOTALL)
_AFTER_TURNS = re.compile(r"after\s+(?P<n>\d+)\s+turns?", re.IGNORECASE)
_EVALUATION = re.compile(r"^Evaluation:\s*(?P<k>\d+)\s*$", re.MULTILINE)
_GOAL_LINE = re.compile(r"^Goal:\s*(?P<goal>.*)$", re.MULTILINE)


class TransientModelError(RuntimeError):
    """A model failure worth retrying (rate limit, dropped connection); see the retry layer."""


def count_tokens(text: str) -> int:
    """Whitespace words: deterministic, cheap, and monotone in the prompt's length."""
    return len(text.split())


def _tool_names(tools: Sequence[Any]) -> tuple[str, ...]:
    names: list[str] = []
    for tool in tools:
        if isinstance(tool, BaseTool):
            names.append(tool.name)
        elif isinstance(tool, dict) and "name" in tool:
            names.append(str(tool["name"]))
        else:
            names.append(convert_to_openai_tool(tool)["function"]["name"])
    return tuple(names)


class EmbeddedChatModel(BaseChatModel):
    """Deterministic offline chat model; see the module docstring for its rules."""

    model_name: str = EMBEDDED_MODEL_NAME
    fail_times: int = 0
    """Raise :class:`TransientModelError` on this many first calls (counted per instance)."""
    max_answer_chars: int = 200

    _calls: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "deerflow-embedded"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    @property
    def calls(self) -> int:
        """How many times the model was asked, failed attempts included."""
        return self._calls

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        # The binding carries the tool names into every call, which is all the rules need:
        # `delegate:` only becomes a tool call when a `task` tool is actually bound.
        return self.bind(bound_tools=_tool_names(tools), tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._calls += 1
            call = self._calls
        if call <= self.fail_times:
            raise TransientModelError(f"embedded model transient failure {call}/{self.fail_times}")
        reply = self._reply(messages, tuple(kwargs.get("bound_tools") or ()))
        prompt_tokens = sum(count_tokens(content_text(m.content)) for m in messages)
        output_tokens = max(
            1,
            count_tokens(content_text(reply.content))
            + sum(count_tokens(json.dumps(tc["args"])) + 1 for tc in reply.tool_calls),
        )
        reply.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        }
        reply.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # No I/O: answering inline avoids a thread hop per call.
        return self._generate(messages, stop, None, **kwargs)

    # -- rules -----------------------------------------------------------------------------

    def _reply(self, messages: list[BaseMessage], tools: tuple[str, ...]) -> AIMessage:
        msg_id = f"run-{uuid.uuid4()}"
        full = "\n".join(content_text(m.content) for m in messages)
        for marker, answer in (
            (TITLE_MARKER, self._title),
            (GOAL_MARKER, self._goal),
            (MEMORY_MARKER, self._memory),
            (SUMMARY_MARKER, self._summary),
        ):
            if marker in full:
                return AIMessage(content=answer(full), id=msg_id)

        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            name = last.name or "tool"
            return AIMessage(content=f"Done. {name} returned: {content_text(last.content)}", id=msg_id)

        text = content_text(last.content).strip() if isinstance(last, HumanMessage) else ""
        delegate = _DELEGATE.match(text)
        if delegate and "task" in tools:
            task = delegate.group("task").strip()
            return self._tool_call(msg_id, "task", {"description": task, "prompt": task})
        use = _USE.match(text)
        if use and use.group("tool") in tools:
            try:
                args = json.loads(use.group("args") or "{}")
            except json.JSONDecodeError:
                args = None
            if isinstance(args, dict):
                return self._tool_call(msg_id, use.group("tool"), args)
        if delegate:
            # No `task` tool bound (a subagent): do the work ourselves.
            text = delegate.group("task").strip()
        return AIMessage(content=self._answer(text), id=msg_id)

    @staticmethod
    def _tool_call(msg_id: str, name: str, args: dict[str, Any]) -> AIMessage:
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        return AIMessage(content="", id=msg_id, tool_calls=[{"name": name, "args": args, "id": call_id}])

    def _answer(self, text: str) -> str:
        if not text:
            return "Hello! How can I help?"
        body = " ".join(text.split())
        if len(body) > self.max_answer_chars:
            body = body[: self.max_answer_chars - 1] + "…"
        return f"Here is my answer to: {body}"

    @staticmethod
    def _after(full: str, header: str) -> str:
        _, _, rest = full.partition(header)
        return rest

    def _title(self, full: str) -> str:
        max_chars = 60
        found = re.search(r"at most (\d+) characters", full)
        if found:
            max_chars = int(found.group(1))
        user = re.search(r"^User:\s*(.*)$", full, re.MULTILINE)
        words = (user.group(1) if user else "Conversation").split()
        title = " ".join(words[:6]).strip(" .:;,") or "Conversation"
        title = title[0].upper() + title[1:]
        return title[:max_chars]

    @staticmethod
    def _goal(full: str) -> str:
        goal_line = _GOAL_LINE.search(full)
        goal = goal_line.group("goal") if goal_line else ""
        evaluation = _EVALUATION.search(full)
        k = int(evaluation.group("k")) if evaluation else 1
        if re.search(r"\bnever\b", goal, re.IGNORECASE):
            met, reason = False, "the goal says it is never met"
        else:
            after = _AFTER_TURNS.search(goal)
            needed = int(after.group("n")) if after else 1
            met = k >= needed
            reason = f"evaluation {k} of {needed} needed"
        return json.dumps({"met": met, "reason": reason})

    @staticmethod
    def _memory(full: str) -> str:
        facts: list[str] = []
        for line in full.splitlines():
            role, sep, text = line.partition(":")
            if sep and role.strip() in {"human", "user"} and text.strip():
                fact = f"The user said: {' '.join(text.split())[:120]}"
                if fact not in facts:
                    facts.append(fact)
        return json.dumps(facts)

    def _summary(self, full: str) -> str:
        lines = [ln for ln in full.splitlines() if ":" in ln and not ln.startswith("###")]
        body = " | ".join(" ".join(ln.split())[:60] for ln in lines[-8:])
        return f"{len(lines)} earlier message(s): {body}"[: max(80, self.max_answer_chars * 2)]
