"""Title generation: a host-owned model call, observed as ``SystemOperationKind.TITLE``.

Both paths are observed. The async one (every Gateway and client run) awaits observers
inline through ``observe_system_call``. The sync one (a direct ``graph.invoke``) has no loop
to await on, so it submits the finished observation fire-and-forget, as the memory bridge
does; with no registered notification loop that observation is dropped.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.language_models import BaseChatModel

from deerflow_ext.extensions.observe import observe_system_call, submit_system_observation
from deerflow_ext.extensions.snapshot import LoadedExtensions
from deerflow_extension_api import ExtensionData, SystemModelRequest, SystemModelResult, SystemOperationKind

from .models import effective_model_name
from .prompts import render_title_prompt
from .system_calls import system_call_config

__all__ = ["clean_title", "generate_title", "generate_title_sync"]


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
    prompt = render_title_prompt(question, answer, max_chars=max_chars)
    request = SystemModelRequest(messages=prompt, model_name=effective_model_name(model))
    config = system_call_config(SystemOperationKind.TITLE)
    response: Any = await observe_system_call(
        extensions, task_store, SystemOperationKind.TITLE, request, lambda: model.ainvoke(prompt, config=config)
    )
    return clean_title(getattr(response, "content", response), max_chars=max_chars)


def generate_title_sync(
    model: BaseChatModel,
    question: str,
    answer: str,
    *,
    max_chars: int,
    extensions: LoadedExtensions,
    task_store: ExtensionData | None,
) -> str | None:
    """:func:`generate_title` for the sync path; the observation is submitted, not awaited."""
    prompt = render_title_prompt(question, answer, max_chars=max_chars)
    config = system_call_config(SystemOperationKind.TITLE)
    if not extensions.system_model_observers:
        response: Any = model.invoke(prompt, config=config)
        return clean_title(getattr(response, "content", response), max_chars=max_chars)
    request = SystemModelRequest(messages=prompt, model_name=effective_model_name(model))
    started = time.perf_counter()
    try:
        response = model.invoke(prompt, config=config)
    except Exception as exc:
        failed = SystemModelResult(error=exc, duration_ms=(time.perf_counter() - started) * 1000.0)
        submit_system_observation(extensions, task_store, SystemOperationKind.TITLE, request, failed)
        raise
    done = SystemModelResult(response=response, duration_ms=(time.perf_counter() - started) * 1000.0)
    submit_system_observation(extensions, task_store, SystemOperationKind.TITLE, request, done)
    return clean_title(getattr(response, "content", response), max_chars=max_chars)
