"""Model invocation for extension services (digest §4.12): a grant's roles, every check before
the provider, sanitised failures, the concurrency pool, revocation, and the wiring to services."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from deerflow_ext.agents.model_access import GrantedModelInvoker
from deerflow_ext.config.schema import AppConfig, ModelEntry, ModelInvocationGrant, PluginEntry
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.contract.registry import GrantedService
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
from deerflow_ext.gateway.app import load_gateway_extensions
from deerflow_extension_api import (
    ExtensionRuntimeDeps,
    ModelInvocationFailed,
    ModelInvocationRequest,
    ModelInvocationUnauthorized,
    ModelInvocationUnavailable,
    ModelMessage,
    ModelOutputValidationError,
)
from extensions import fixtures_full_stack

EMBEDDED = "deerflow_ext.agents.embedded_model:EmbeddedChatModel"
CONFIG = AppConfig(models=[ModelEntry(name="fast", use=EMBEDDED), ModelEntry(name="big", use=EMBEDDED)])


class Scripted(BaseChatModel):
    """A chat model that answers what it is told to, after ``delay`` seconds, or raises."""

    reply: Any = "plain answer"
    delay: float = 0.0
    error: Exception | None = None
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kw: Any,
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kw: Any,
    ) -> ChatResult:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        message = self.reply if isinstance(self.reply, AIMessage) else AIMessage(content=self.reply)
        message.usage_metadata = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
        return ChatResult(generations=[ChatGeneration(message=message)])


def invoker(model: Scripted | None = None, **grant: Any) -> tuple[GrantedModelInvoker, Scripted]:
    scripted = model if model is not None else Scripted()
    values: dict[str, Any] = {"roles": {"classifier": "fast"}, **grant}
    made = GrantedModelInvoker(
        ModelInvocationGrant(**values), CONFIG, source="acme", model_factory=lambda name: scripted
    )
    made.open()
    return made, scripted


def ask(text: str = "classify this", **kw: Any) -> ModelInvocationRequest:
    return ModelInvocationRequest([ModelMessage("user", text)], **kw)


async def test_a_granted_role_calls_its_model() -> None:
    made, model = invoker()
    result = await made.invoke(ask(model_role="classifier", purpose="triage"))
    assert (result.content, result.resolved_model, result.structured_output) == ("plain answer", "fast", None)
    assert result.usage is not None and result.usage.total_tokens == 5
    assert (await made.invoke(ask())).content == "plain answer"  # the one granted role by default
    assert model.calls == 2


async def test_roles_must_be_granted_and_their_models_configured() -> None:
    made, model = invoker(roles={"classifier": "fast", "writer": "missing"})
    with pytest.raises(ModelInvocationUnauthorized):
        await made.invoke(ask(model_role="admin"))
    with pytest.raises(ModelInvocationUnauthorized):
        await made.invoke(ask())  # two roles: the request must name one
    with pytest.raises(ModelInvocationUnavailable):
        await made.invoke(ask(model_role="writer"))
    assert model.calls == 0


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), True, "5"])
async def test_bad_timeouts_fail_before_the_provider(seconds: Any) -> None:
    made, model = invoker()
    with pytest.raises(ModelInvocationFailed, match="timeout_seconds"):
        await made.invoke(ask(timeout_seconds=seconds))
    assert model.calls == 0


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/x"}}},
        {"type": "array"},
        {"type": "object", "required": "a"},
        {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
    ],
)
async def test_bad_response_schemas_fail_before_the_provider(schema: dict[str, Any]) -> None:
    made, model = invoker()
    with pytest.raises(ModelInvocationFailed, match="response_schema"):
        await made.invoke(ask(response_schema=schema))
    assert model.calls == 0


async def test_structured_output_is_validated() -> None:
    schema = {"type": "object", "properties": {"label": {"enum": ["spam", "ham"]}}, "required": ["label"]}
    made, _ = invoker(Scripted(reply='```json\n{"label": "ham"}\n```'))
    assert (await made.invoke(ask(response_schema=schema))).structured_output == {"label": "ham"}
    for reply in ('{"label": "eggs"}', "not json", "[1]"):
        made, _ = invoker(Scripted(reply=reply))
        with pytest.raises(ModelOutputValidationError):
            await made.invoke(ask(response_schema=schema))


async def test_input_and_output_limits_at_and_past_their_edges() -> None:
    made, model = invoker(max_input_chars=10)
    assert (await made.invoke(ask("x" * 10))).content
    with pytest.raises(ModelInvocationFailed, match="input exceeds 10"):
        await made.invoke(ask("x" * 11))
    assert model.calls == 1
    made, _ = invoker(Scripted(reply="y" * 5), max_output_chars=5)
    assert (await made.invoke(ask())).content == "y" * 5
    made, _ = invoker(Scripted(reply="y" * 6), max_output_chars=5)
    with pytest.raises(ModelInvocationFailed, match="output exceeds 5"):
        await made.invoke(ask())


async def test_tool_calls_and_provider_errors_are_failures_without_their_cause() -> None:
    made, _ = invoker(Scripted(reply=AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "1"}])))
    with pytest.raises(ModelInvocationFailed, match="tool call"):
        await made.invoke(ask())
    made, _ = invoker(Scripted(error=RuntimeError("api key sk-secret rejected")))
    with pytest.raises(ModelInvocationFailed) as raised:
        await made.invoke(ask())
    assert "sk-secret" not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__context__ is None


async def test_the_timeout_covers_waiting_for_capacity() -> None:
    made, model = invoker(Scripted(delay=0.5), max_concurrency=1)
    first = asyncio.create_task(made.invoke(ask()))
    await asyncio.sleep(0.05)
    with pytest.raises(ModelInvocationFailed, match="timed out"):
        await made.invoke(ask(timeout_seconds=0.1))  # the pool is busy for 0.45 s more
    assert (await first).content == "plain answer" and model.calls == 1


async def test_closing_revokes_calls_in_flight_and_later_ones() -> None:
    made, _ = invoker(Scripted(delay=5))
    pending = asyncio.create_task(made.invoke(ask()))
    await asyncio.sleep(0.05)
    made.close()
    with pytest.raises(ModelInvocationUnavailable):
        await pending
    with pytest.raises(ModelInvocationUnavailable):
        await made.invoke(ask())


async def test_a_granted_records_services_get_the_invoker_and_others_none() -> None:
    fixtures_full_stack.SERVICES.clear()
    use = "extensions.fixtures_full_stack:install_service"
    config = AppConfig(
        models=CONFIG.models,
        plugins=[
            PluginEntry(name="granted", use=use, host_access={"model_invocation": {"roles": {"classifier": "fast"}}}),
            PluginEntry(name="plain", use=use),
        ],
    )
    ext = load_gateway_extensions(config, DiagnosticsList(), EntryPointIndex())
    granted, plain = (c.contributor for c in ext.services)
    assert isinstance(granted, GrantedService) and not isinstance(plain, GrantedService)
    for service in (granted, plain):
        await service.start(ExtensionRuntimeDeps())
    first, second = fixtures_full_stack.SERVICES
    assert second.deps.model_invoker is None
    lent = first.deps.model_invoker
    assert (await lent.invoke(ask())).resolved_model == "fast"  # the embedded model, configured as "fast"
    await granted.stop()
    assert first.stopped
    with pytest.raises(ModelInvocationUnavailable):
        await lent.invoke(ask())


@pytest.mark.parametrize(
    "grant",
    [
        {"roles": {}},
        {"roles": {" classifier": "fast"}},
        {"roles": {"classifier": ""}},
        {"roles": {"c": "fast"}, "max_concurrency": 65},
        {"roles": {"c": "fast"}, "timeout_seconds": 0},
        {"roles": {"c": "fast"}, "timeout_seconds": 601},
        {"roles": {"c": "fast"}, "max_input_chars": 1_048_577},
        {"roles": {"c": "fast"}, "unknown": 1},
    ],
)
def test_invalid_grants_are_refused_by_the_config_schema(grant: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PluginEntry(name="n", use="u", host_access={"model_invocation": grant})


def test_grant_limits_accepted_at_their_edges() -> None:
    grant = ModelInvocationGrant(
        roles={"c": "fast"}, max_concurrency=64, timeout_seconds=600, max_input_chars=1_048_576, max_output_chars=1
    )
    assert grant.max_concurrency == 64
