"""Model invocation for extension services: configured models, by role, under a grant.

An operator grants a record's services logical roles mapped to configured models
(``host_access.model_invocation`` in ``config.yaml``); the services get a
:class:`GrantedModelInvoker` on ``ExtensionRuntimeDeps.model_invoker`` (``None`` without a
grant). Everything a call could do wrong is refused before the provider is reached — a role
not granted, a model not configured, a bad timeout or response schema, input over the limit —
and everything the provider does wrong comes back as one of the contract's errors, with no
provider exception chained (it may carry a key or a prompt). One semaphore per grant bounds
the calls in flight, and waiting for it counts against the call's timeout. The host opens the
invoker when a granted service starts and closes it when the service stops or its start fails:
calls in flight are cancelled and later ones are ``ModelInvocationUnavailable``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from deerflow_ext.config.schema import AppConfig, ModelInvocationGrant
from deerflow_ext.extensions.full_stack.schema import validate_schema
from deerflow_extension_api import (
    ModelInvocationFailed,
    ModelInvocationRequest,
    ModelInvocationResult,
    ModelInvocationUnauthorized,
    ModelInvocationUnavailable,
    ModelMessage,
    ModelOutputValidationError,
    ModelUsage,
)

from .messages import content_text
from .models import shared_model_factory

__all__ = ["GrantedModelInvoker"]

logger = logging.getLogger("deerflow_ext.extensions")

_MESSAGE_TYPES: dict[str, type[BaseMessage]] = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


class GrantedModelInvoker:
    """``deerflow_extension_api.ModelInvoker`` for one record's grant."""

    def __init__(
        self,
        grant: ModelInvocationGrant,
        config: AppConfig,
        *,
        source: str,
        model_factory: Callable[[str], BaseChatModel] | None = None,
    ) -> None:
        self._grant = grant
        self._models = {entry.name for entry in config.models}
        self._source = source
        self._factory = model_factory or shared_model_factory(config)
        self._capacity = asyncio.Semaphore(grant.max_concurrency)
        self._open = False
        self._calls: set[asyncio.Task[Any]] = set()

    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        """Revoke: cancel the calls in flight; later calls are refused."""
        self._open = False
        for task in list(self._calls):
            task.cancel()

    async def invoke(self, request: ModelInvocationRequest) -> ModelInvocationResult:
        if not self._open:
            raise ModelInvocationUnavailable("model invocation is stopped")
        model_name = self._model_for(request.model_role)
        timeout = self._timeout(request.timeout_seconds)
        schema = self._schema(request.response_schema)
        messages = self._messages(request.messages)
        task = asyncio.ensure_future(self._call(model_name, messages, request.purpose, timeout))
        self._calls.add(task)
        try:
            response = await task
        except asyncio.CancelledError:
            if not self._open and not _cancelling():
                raise ModelInvocationUnavailable("model invocation was stopped during the call") from None
            raise
        finally:
            self._calls.discard(task)
        return self._result(response, model_name, schema)

    # -- checks before the provider ------------------------------------------------------------
    def _model_for(self, role: str | None) -> str:
        roles = self._grant.roles
        if role is None and len(roles) == 1:
            role = next(iter(roles))
        if role is None or role not in roles:
            raise ModelInvocationUnauthorized(f"model role {role!r} is not granted to this extension")
        name = roles[role]
        if name not in self._models:
            raise ModelInvocationUnavailable(f"model role {role!r}: its model is not configured")
        return name

    def _timeout(self, requested: object) -> float:
        limit = self._grant.timeout_seconds
        if requested is None:
            return limit
        if not (type(requested) is int or type(requested) is float):  # bool and str are refused
            raise ModelInvocationFailed("timeout_seconds must be a positive finite number")
        seconds = float(requested)
        if not math.isfinite(seconds) or seconds <= 0:
            raise ModelInvocationFailed("timeout_seconds must be a positive finite number")
        return min(seconds, limit)

    @staticmethod
    def _schema(schema: Mapping[str, object] | None) -> Draft202012Validator | None:
        if schema is None:
            return None
        try:
            checked = validate_schema(dict(schema))
        except (ValueError, TypeError):
            raise ModelInvocationFailed("response_schema must be a JSON object schema without references") from None
        dialect = checked.get("$schema")
        if dialect is not None and "2020-12" not in str(dialect):
            raise ModelInvocationFailed("response_schema must use JSON Schema draft 2020-12")
        return Draft202012Validator(checked)

    def _messages(self, messages: tuple[ModelMessage, ...] | Any) -> list[BaseMessage]:
        built: list[BaseMessage] = []
        total = 0
        for message in messages:
            kind = _MESSAGE_TYPES.get(getattr(message, "role", None))  # type: ignore[arg-type]
            content = getattr(message, "content", None)
            if kind is None or not isinstance(content, str):
                raise ModelInvocationFailed("messages must be ModelMessage(role, content) with a text content")
            total += len(content)
            built.append(kind(content=content))
        if not built:
            raise ModelInvocationFailed("a model invocation needs at least one message")
        if total > self._grant.max_input_chars:
            raise ModelInvocationFailed(f"input exceeds {self._grant.max_input_chars} characters")
        return built

    # -- the call --------------------------------------------------------------------------------
    async def _call(self, model_name: str, messages: list[BaseMessage], purpose: str | None, seconds: float) -> Any:
        failed: str | None = None
        try:
            async with asyncio.timeout(seconds):
                async with self._capacity:
                    model = self._factory(model_name)
                    metadata = {"extension_source": self._source, "extension_purpose": purpose or ""}
                    return await model.ainvoke(messages, config={"metadata": metadata})
        except TimeoutError:
            failed = "the model call timed out"
        except Exception as exc:  # the provider's: logged by type, never chained
            logger.warning("model invocation by %s failed: %s", self._source, type(exc).__name__)
            failed = "the model call failed"
        raise ModelInvocationFailed(failed)

    def _result(self, response: Any, model_name: str, schema: Draft202012Validator | None) -> ModelInvocationResult:
        if getattr(response, "tool_calls", None):
            raise ModelInvocationFailed("the model answered with a tool call")
        text = content_text(getattr(response, "content", ""))
        if len(text) > self._grant.max_output_chars:
            raise ModelInvocationFailed(f"output exceeds {self._grant.max_output_chars} characters")
        structured: dict[str, Any] | None = None
        if schema is not None:
            structured = _parsed(text)
            if structured is None or not schema.is_valid(structured):
                raise ModelOutputValidationError("the model's output does not match response_schema")
        usage = getattr(response, "usage_metadata", None) or {}
        return ModelInvocationResult(
            content=text,
            structured_output=structured,
            resolved_model=model_name,
            usage=ModelUsage(usage.get("input_tokens"), usage.get("output_tokens"), usage.get("total_tokens")),
        )


def _parsed(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _cancelling() -> bool:
    """Whether the caller's own task is being cancelled (then its CancelledError stands)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
