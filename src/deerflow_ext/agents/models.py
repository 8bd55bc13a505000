"""Which chat model an agent gets: a configured one imported by ``use``, else the embedded one.

Real models are one config entry away (``use: langchain_openai:ChatOpenAI`` plus its
constructor keys); importing them by path keeps every provider package optional.
"""

from __future__ import annotations

import importlib
from typing import Any

from langchain_core.language_models import BaseChatModel

from deerflow_ext.config.schema import AppConfig, ModelEntry

from .model import EMBEDDED_MODEL_NAME, EmbeddedChatModel

__all__ = ["create_chat_model", "effective_model_name", "model_entry", "public_model_parameters"]

# Constructor keys that must never reach a descriptor or a log line.
_SECRET_HINTS = ("api_key", "secret", "password", "credential", "authorization")


def model_entry(config: AppConfig, name: str | None) -> ModelEntry | None:
    """The entry named ``name`` (the first one when ``name`` is None); None when none exist."""
    if not config.models:
        if name not in (None, EMBEDDED_MODEL_NAME):
            raise ValueError(f"unknown model {name!r}: no models are configured")
        return None
    if name is None:
        return config.models[0]
    for entry in config.models:
        if entry.name == name:
            return entry
    known = ", ".join(entry.name for entry in config.models)
    raise ValueError(f"unknown model {name!r}; configured models: {known}")


def create_chat_model(config: AppConfig, name: str | None = None) -> BaseChatModel:
    """Instantiate the model called ``name`` (or the default one)."""
    entry = model_entry(config, name)
    if entry is None:
        return EmbeddedChatModel()
    module_name, _, attr = entry.use.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    model = target(**entry.params)
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model {entry.name!r}: {entry.use} did not produce a BaseChatModel")
    return model


def effective_model_name(model: BaseChatModel) -> str:
    """The provider-side model id: what actually answers, whatever alias was requested."""
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def public_model_parameters(config: AppConfig, name: str | None) -> dict[str, Any]:
    """The entry's constructor keys minus secrets: they change behaviour, keys do not."""
    entry = model_entry(config, name)
    if entry is None:
        return {}
    return {
        key: value
        for key, value in sorted(entry.params.items())
        if not any(hint in key.lower() for hint in _SECRET_HINTS)
    }
