"""Prompt templates for the host's own model calls, and the lead agent's base prompt.

Each system-call template opens with a marker line. A real model ignores it; the embedded
model (``agents.embedded_model``) recognises it and answers in the shape the host parses, which is
what lets title, goal, memory and summarization run offline. Keeping the markers here, next
to the templates, means the model and the callers can never disagree about them.
"""

from __future__ import annotations

from .messages import content_text

__all__ = [
    "GOAL_CONTINUATION_PROMPT",
    "GOAL_MARKER",
    "GOAL_PROMPT",
    "LEAD_SYSTEM_PROMPT",
    "MEMORY_MARKER",
    "MEMORY_PROMPT",
    "SUBAGENT_SYSTEM_PROMPT",
    "SUMMARY_MARKER",
    "SUMMARY_MESSAGE_PREFIX",
    "SUMMARY_PROMPT",
    "TITLE_MARKER",
    "TITLE_PROMPT",
    "render_goal_prompt",
    "render_memory_prompt",
    "render_summary_prompt",
    "render_title_prompt",
    "render_transcript",
]

TITLE_MARKER = "### deerflow:title"
GOAL_MARKER = "### deerflow:goal-evaluation"
MEMORY_MARKER = "### deerflow:memory-extraction"
SUMMARY_MARKER = "### deerflow:summarization"

# The summary replaces the compacted messages in state. It must not carry SUMMARY_MARKER,
# or the embedded model would answer every later turn as if it were asked to summarise.
SUMMARY_MESSAGE_PREFIX = "Summary of the earlier conversation:"

LEAD_SYSTEM_PROMPT = (
    "You are DeerFlow, a lead agent. Answer the user directly when you can. "
    "Delegate self-contained work to a subagent with the `task` tool. "
    "Use `ask_clarification` only when the request cannot be answered without more input."
)

SUBAGENT_SYSTEM_PROMPT = "You are a DeerFlow subagent. Complete the delegated task and reply with the result only."

TITLE_PROMPT = (
    TITLE_MARKER
    + "\nWrite a short title (at most {max_chars} characters) for this conversation."
    + " Reply with the title only.\n\nUser: {question}\nAssistant: {answer}"
)

GOAL_PROMPT = (
    GOAL_MARKER
    + "\nDecide whether the goal below has been met by the conversation so far."
    + ' Reply with JSON only: {{"met": true|false, "reason": "..."}}.'
    + "\nGoal: {goal}\nEvaluation: {evaluation}"
)

GOAL_CONTINUATION_PROMPT = "The goal is not met yet ({reason}). Continue working toward it: {goal}"

MEMORY_PROMPT = (
    MEMORY_MARKER
    + "\nExtract durable facts about the user from the conversation below."
    + ' Reply with a JSON list of short strings only, e.g. ["The user likes tea"].'
    + "\n\n{transcript}"
)

SUMMARY_PROMPT = (
    SUMMARY_MARKER
    + "\nSummarise the conversation below in a few sentences, keeping names, numbers and decisions."
    + "\n\n{transcript}"
)


def render_transcript(messages: object) -> str:
    """``role: text`` lines; tolerant of message objects and ``{"role", "content"}`` dicts."""
    lines: list[str] = []
    for message in messages or ():  # type: ignore[attr-defined]
        if isinstance(message, dict):
            role, content = str(message.get("role", "user")), message.get("content", "")
        else:
            role, content = str(getattr(message, "type", "message")), getattr(message, "content", "")
        lines.append(f"{role}: {content_text(content)}")
    return "\n".join(lines)


def render_title_prompt(question: str, answer: str, *, max_chars: int) -> str:
    return TITLE_PROMPT.format(max_chars=max_chars, question=question, answer=answer)


def render_goal_prompt(goal: str, *, evaluation: int) -> str:
    return GOAL_PROMPT.format(goal=goal, evaluation=evaluation)


def render_memory_prompt(messages: object) -> str:
    return MEMORY_PROMPT.format(transcript=render_transcript(messages))


def render_summary_prompt(messages: object) -> str:
    return SUMMARY_PROMPT.format(transcript=render_transcript(messages))
