"""The retry layer for model calls and the error boundary for tool calls."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from deerflow_ext.exception_text import exception_text

from ..embedded_model import TransientModelError

__all__ = ["LLMErrorHandlingMiddleware", "ToolErrorHandlingMiddleware", "describe_failure", "is_transient"]

logger = logging.getLogger(__name__)

# Provider SDK errors recognised by class name, so no provider package has to be imported.
_TRANSIENT_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "OverloadedError",
        # langchain-core's provider-neutral taxonomy (langchain-openai 1.x raises these)
        "ModelConnectionError",
        "ModelRateLimitError",
        "ModelTimeoutError",
    }
)


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, timeouts, dropped connections."""
    if isinstance(exc, (TransientModelError, TimeoutError, ConnectionError)):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


def describe_failure(exc: BaseException, *, limit: int = 300) -> str:
    """``TypeName: message`` on one line, bounded: provider errors embed whole JSON bodies."""
    return exception_text(exc, one_line=True, limit=limit)


class LLMErrorHandlingMiddleware(AgentMiddleware):
    """Retries transient model failures: the *retry layer*, the host's one retry policy.

    Everything outside it (``MODEL_LOGICAL``) sees one logical call; everything inside it
    (``MODEL_PHYSICAL``) sees each attempt. A non-transient error, or the last transient
    one, propagates unchanged so the run fails with the provider's own exception. Providers
    are built with their own retries off (``agents.models``), so ``max_retries=2`` means at
    most three requests per logical call, and each failed request is one WARNING line (the
    traceback only at DEBUG, where the run's failure line carries it).
    """

    def __init__(self, max_retries: int = 2, backoff_seconds: float = 0.0) -> None:
        super().__init__()
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds

    def release_policy_parameters(self) -> dict[str, object]:
        return {"max_retries": self.max_retries}

    def _delay(self, attempt: int) -> float:
        delay: float = self.backoff_seconds * (2**attempt)
        return delay

    def _gives_up(self, exc: Exception, attempt: int) -> bool:
        """Log the failed attempt (one line); True when it is not retried."""
        transient = is_transient(exc)
        last = attempt >= self.max_retries or not transient
        if last:
            why = "giving up" if transient else "not retried (not transient)"
        else:
            why = f"retrying in {self._delay(attempt):g}s"
        logger.warning(
            "model call failed (attempt %d of %d): %s; %s",
            attempt + 1,
            self.max_retries + 1 if transient else attempt + 1,
            describe_failure(exc),
            why,
        )
        return last

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        attempt = 0
        while True:
            try:
                return handler(request)
            except Exception as exc:
                if self._gives_up(exc, attempt):
                    raise
                time.sleep(self._delay(attempt))
                attempt += 1

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        attempt = 0
        while True:
            try:
                return await handler(request)
            except Exception as exc:
                if self._gives_up(exc, attempt):
                    raise
                await asyncio.sleep(self._delay(attempt))
                attempt += 1


def _error_message(request: ToolCallRequest, exc: Exception) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(
        content=f"Error: tool {call['name']!r} failed: {type(exc).__name__}: {exc}",
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
    )


class ToolErrorHandlingMiddleware(AgentMiddleware):
    """Turns a tool's exception into an error ``ToolMessage`` the model can react to.

    Graph control flow (interrupts, ``GraphBubbleUp``) is not an error and passes through.
    """

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        try:
            return handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            logger.info("tool %s failed: %s", request.tool_call["name"], exc)
            return _error_message(request, exc)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            logger.info("tool %s failed: %s", request.tool_call["name"], exc)
            return _error_message(request, exc)
