"""Title generation: a host-owned model call, observed as ``SystemOperationKind.TITLE``."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from deerflow_ext.extensions.snapshot import LoadedExtensions
from deerflow_extension_api import ExtensionData, SystemModelRequest, SystemOperationKind

from .models import effective_model_name
from .prompts import render_title_prompt

__all__ = ["clean_title", "generate_title"]


def clean_title(raw: object, *, max_chars: int) -> str | None:
    """First line, unquoted, trimmed to ``max_chars``; None when nothing usable is left."""
    text = raw if isinstance(raw, str) else str(raw)
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line.strip().strip("\"'`").strip()
    if line.lower().startswith("title:"):
        line = line[6:].strip()
    return line[:max_chars].rstrip() or None


async def generate_title(
    model: BaseChatModel,
    question: str,
    answer: str,
    *,
    max_chars: int,
    extensions: LoadedExtensions,
    task_store: ExtensionData | None,
) -> str | None:
    """Ask ``model`` for a title of the first exchange; the prompt is one string."""
    from deerflow_ext.extensions.observe import observe_system_call

    prompt = render_title_prompt(question, answer, max_chars=max_chars)
    request = SystemModelRequest(messages=prompt, model_name=effective_model_name(model))
    response: Any = await observe_system_call(
        extensions, task_store, SystemOperationKind.TITLE, request, lambda: model.ainvoke(prompt)
    )
    return clean_title(getattr(response, "content", response), max_chars=max_chars)
