"""Calling one of the deployment's configured models from an extension service.

An operator grants a service logical *roles* ("classifier", "summariser") mapped to
configured models; the service then asks for a role, never for a provider or a key. The
invoker arrives on ``ExtensionRuntimeDeps.model_invoker`` (``None`` without a grant). Every
failure is one of the errors below, stripped of the provider's exception and credentials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "ModelInvocationError",
    "ModelInvocationFailed",
    "ModelInvocationRequest",
    "ModelInvocationResult",
    "ModelInvocationUnauthorized",
    "ModelInvocationUnavailable",
    "ModelInvoker",
    "ModelMessage",
    "ModelOutputValidationError",
    "ModelUsage",
]


class ModelInvocationError(RuntimeError):
    """Base of every invocation failure; carries no provider exception or credential."""


class ModelInvocationUnavailable(ModelInvocationError):
    """The capability is stopped, or the granted model is not available."""


class ModelInvocationUnauthorized(ModelInvocationError):
    """The requested role is not granted to this extension."""


class ModelInvocationFailed(ModelInvocationError):
    """The call failed, exceeded a limit or timed out (waiting for capacity included)."""


class ModelOutputValidationError(ModelInvocationFailed):
    """The model's output could not be parsed or did not match the requested schema."""


@dataclass(frozen=True, slots=True)
class ModelMessage:
    """One plain-text message of the conversation sent to the model."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class ModelInvocationRequest:
    """What to send. ``model_role`` picks a granted role (the grant's only one when
    ``None``); ``response_schema`` asks for a JSON object matching it; ``purpose`` labels
    the call in the host's traces."""

    messages: Sequence[ModelMessage]
    model_role: str | None = None
    purpose: str | None = None
    response_schema: Mapping[str, object] | None = None
    timeout_seconds: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Token counts as the provider reported them (``None`` when it did not)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ModelInvocationResult:
    """The model's answer; ``structured_output`` is the validated object when a schema was asked."""

    content: str
    structured_output: Mapping[str, object] | None = None
    resolved_model: str | None = None
    usage: ModelUsage | None = None


@runtime_checkable
class ModelInvoker(Protocol):
    """The host's invoker. Cancelling the caller raises ``CancelledError``; the default
    says this host cannot invoke models."""

    async def invoke(self, request: ModelInvocationRequest) -> ModelInvocationResult:
        raise ModelInvocationUnavailable("Model invocation is not supported by this host")
