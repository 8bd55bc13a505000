"""Reading text out of chat messages: one rule for the whole host.

A message's ``content`` is a string, or (multimodal and reasoning models) a list of parts,
some of them ``{"type": "text", "text": ...}`` dicts. Prompts, the embedded model, the
summary and the answer a run returns all need "the text of it"; they read it here, so a
list of parts never reaches a prompt as its ``repr``.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage

__all__ = ["content_text", "final_answer"]


def content_text(content: object) -> str:
    """The text of a message's ``content``: a string as it is, a list's text parts joined by a space."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in content]
        return " ".join(part for part in parts if part)
    return str(content)


def final_answer(messages: Sequence[AnyMessage]) -> str:
    """The text of the last model reply that ends the turn (asks for no tool)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and not message.tool_calls:
            return str(message.text)
    return ""
