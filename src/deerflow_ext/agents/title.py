"""Title generation: a host-owned model call, observed as ``SystemOperationKind.TITLE``.

Both paths are observed. The async one (every Gateway and client run) awaits observers
inline through ``observe_system_call``. The sync one (a direct ``graph.invoke``) has no loop
to await on, so it submits the finished observation fire-and-forget, as the memory bridge
does; with no registered notification loop that observation is dropped.

A title is an aid, asked for after the answer exists: a failed or (async path, when a bound
is set) late title call is one warning line naming the model, and the thread stays
untitled (the next exchange tries again); the run keeps its answer and its outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.extensions.notifications.observe import observe_system_call, observe_system_call_sync
from deerflow_extension_api import ExtensionData, SystemModelRequest, SystemOperationKind

from .models import effective_model_name
from .prompts import render_title_prompt
from .system_calls import log_failed_system_call, system_call_config

__all__ = ["TitleCall", "clean_title"]

_R = TypeVar("_R")


def clean_title(raw: object, *, max_chars: int) -> str | None:
    """First line, unquoted, trimmed to ``max_chars``; None when nothing usable is left."""
    text = raw if isinstance(raw, str) else str(raw)
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line.strip().strip("\"'`").strip()
    if line.lower().startswith("title:"):
        line = line[6:].strip()
    return line[:max_chars].rstrip() or None


@dataclass(frozen=True)
class TitleCall:
    """One title request for the first exchange: the prompt is one string.

    Built once, then run on whichever path the graph takes: :meth:`arun` awaits observers
    inline, :meth:`run` (no loop to await on) submits the observation.
    """

    model: BaseChatModel
    prompt: str
    max_chars: int

    @classmethod
    def of(cls, model: BaseChatModel, question: str, answer: str, *, max_chars: int) -> TitleCall:
        return cls(model, render_title_prompt(question, answer, max_chars=max_chars), max_chars)

    def _request(self) -> SystemModelRequest:
        return SystemModelRequest(messages=self.prompt, model_name=effective_model_name(self.model))

    def _title(self, response: Any) -> str | None:
        return clean_title(getattr(response, "content", response), max_chars=self.max_chars)

    def _call(self, invoke: Callable[..., _R]) -> Callable[[], _R]:
        return lambda: invoke(self.prompt, config=system_call_config(_KIND))

    async def arun(
        self, extensions: LoadedExtensions, task_store: ExtensionData | None, *, within: float | None = None
    ) -> str | None:
        """The title, or None when the call failed or took longer than ``within`` seconds."""
        call = self._call(self.model.ainvoke)
        observed = observe_system_call(extensions, task_store, _KIND, self._request(), call)
        bound = None if within is None else asyncio.timeout(within)  # the Gateway's default: no timer
        try:
            if bound is None:
                response = await observed
            else:
                async with bound:
                    response = await observed
        except Exception as exc:
            late = bound is not None and bound.expired()
            _untitled(self.model, TimeoutError(f"no reply within {within:g} s") if late else exc)
            return None
        return self._title(response)

    def run(self, extensions: LoadedExtensions, task_store: ExtensionData | None) -> str | None:
        """The title, or None when the call failed."""
        call = self._call(self.model.invoke)
        try:
            response = observe_system_call_sync(extensions, task_store, _KIND, self._request(), call)
        except Exception as exc:
            _untitled(self.model, exc)
            return None
        return self._title(response)


def _untitled(model: BaseChatModel, exc: BaseException) -> None:
    log_failed_system_call(_KIND, effective_model_name(model), exc, "the run keeps its answer, the thread no title yet")


_KIND = SystemOperationKind.TITLE
