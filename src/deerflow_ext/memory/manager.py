"""The host side of memory: DeerMem driven by the agent's model, observed by extensions.

DeerMem (``memory.engine``) must stay vendorable, so it cannot speak the extension API.
It reports each extraction call through ``MemoryCallbacks.on_memory_llm_result``; this
module's :class:`MemoryObservationBridge` translates that into a ``SystemModelRequest`` /
``SystemModelResult`` of kind ``MEMORY`` and *submits* it to the notification loop rather
than awaiting it. The shape differs from the other system calls on purpose: the callback
runs on DeerMem's worker thread, where there is no event loop to await on and where
blocking on observers would hold the extraction thread hostage to extension code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from deerflow_ext.agents.models import effective_model_name
from deerflow_ext.agents.prompts import render_memory_prompt
from deerflow_ext.agents.system_calls import system_call_config
from deerflow_ext.config.schema import MemoryConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.extensions.notifications import observe
from deerflow_extension_api import SystemModelRequest, SystemModelResult, SystemOperationKind

from .engine import MemoryEngine, MemoryLLMResult

__all__ = ["MemoryManager", "MemoryObservationBridge", "Submit"]

logger = logging.getLogger("deerflow_ext.memory")

#: ``submit_system_observation(ext, task_store, kind, request, result) -> bool``.
Submit = Callable[[LoadedExtensions, Any, SystemOperationKind, SystemModelRequest, SystemModelResult], bool]


def _submit_to_notification_loop(
    ext: LoadedExtensions,
    task_store: Any,
    kind: SystemOperationKind,
    request: SystemModelRequest,
    result: SystemModelResult,
) -> bool:
    # Looked up on the module at call time so the process-wide observation path stays the
    # one in force (tests and embedders may swap it); the import itself is at module scope.
    return observe.submit_system_observation(ext, task_store, kind, request, result)


class MemoryObservationBridge:
    """``MemoryCallbacks`` for one scheduled extraction, bound to the run's snapshot.

    The hook signature has no room for the run's extension generation, so one bridge is
    made per ``schedule`` call and rides along with the debounced request (the newest
    schedule for a thread wins, together with its snapshot). ``task_store`` is ``None``:
    the extraction outlives the run, so observers get a detached store.
    """

    def __init__(self, extensions: LoadedExtensions, *, submit: Submit = _submit_to_notification_loop) -> None:
        self.extensions = extensions
        self._submit = submit

    def on_memory_llm_result(self, **call: Unpack[MemoryLLMResult]) -> None:
        if not self.extensions.system_model_observers:
            return
        request = SystemModelRequest(messages=call["messages"], model_name=call["model_name"])
        result = SystemModelResult(response=call["response"], error=call["error"], duration_ms=call["duration_ms"])
        # Fire-and-forget: never await observers from the extraction thread.
        self._submit(self.extensions, None, SystemOperationKind.MEMORY, request, result)


class MemoryManager:
    """One per host: schedules extraction after runs and serves facts to the middleware.

    With memory disabled there is no engine at all: ``schedule`` is a no-op and ``facts``
    is always empty, so a disabled deployment pays nothing per run.
    """

    def __init__(
        self,
        config: MemoryConfig,
        model: BaseChatModel,
        *,
        model_name: str | None = None,
        submit: Submit = _submit_to_notification_loop,
    ) -> None:
        self.config = config
        self._model = model
        self._model_name = model_name if model_name is not None else effective_model_name(model)
        self._submit = submit
        self._engine: MemoryEngine | None = (
            MemoryEngine(self._extract, None, config.debounce_seconds, model_name=self._model_name)
            if config.enabled
            else None
        )

    @property
    def enabled(self) -> bool:
        return self._engine is not None

    def schedule(self, thread_id: str, messages: Sequence[Any], *, extensions: LoadedExtensions) -> None:
        """Extract facts from ``messages`` after the debounce; observed under ``extensions``."""
        if self._engine is None:
            return
        self._engine.schedule(thread_id, messages, callbacks=MemoryObservationBridge(extensions, submit=self._submit))

    def facts(self, thread_id: str) -> list[str]:
        return self._engine.facts(thread_id) if self._engine is not None else []

    def flush(self, timeout: float | None = None) -> None:
        if self._engine is not None:
            self._engine.flush(timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        if self._engine is not None:
            self._engine.shutdown(timeout)

    def _extract(self, messages: list[Any]) -> str:
        # Runs on DeerMem's worker thread; a synchronous model call is what it expects.
        reply = self._model.invoke(
            [HumanMessage(content=render_memory_prompt(messages))],
            config=system_call_config(SystemOperationKind.MEMORY),
        )
        content = reply.content
        if isinstance(content, str):
            return content
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
