"""Which chat model an agent gets: a configured one imported by ``use``, else the embedded one.

Real models are one config entry away (``use: langchain_openai:ChatOpenAI`` plus its
constructor keys); importing them by path keeps every provider package optional.

Three rules are applied to every configured model:

* **One retry policy.** A provider class with a ``max_retries`` knob is constructed with
  ``max_retries=0``: the host's retry layer (``retry:`` in config.yaml) already retries
  transient failures, and both together multiply (LangChain's 2 retries inside our 2 made a
  failing call 9 attempts).
* **Streamed replies merged as they arrive**: a provider class that streams is built as its
  ``merged_stream`` subclass, so an open conversation holds its reply so far, not every
  chunk of it.
* **Checked before anything starts** (:func:`check_models`): the class imports, the
  constructor takes the keys, the credentials it needs are there. Construction only; the
  provider is never called. Each problem is one ``file:line: field: cause`` line.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from deerflow_ext.config.loading import ConfigError, config_line, format_problem
from deerflow_ext.config.schema import MODEL_PURPOSES, AppConfig, ModelEntry, ModelPurpose
from deerflow_ext.exception_text import exception_text

from .embedded_model import EMBEDDED_MODEL_NAME, EmbeddedChatModel
from .merged_stream import merging_model_class

__all__ = [
    "KNOWN_PROVIDERS",
    "ModelUnusable",
    "check_models",
    "create_chat_model",
    "describe_models",
    "effective_model_name",
    "ensure_models",
    "model_entry",
    "model_name_for",
    "public_model_parameters",
    "shared_model_factory",
]

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


def model_name_for(config: AppConfig, purpose: ModelPurpose) -> str | None:
    """The entry that claims ``purpose``; ``None`` means the default (first) model."""
    for entry in config.models:
        if purpose in entry.purposes:
            return entry.name
    return None


def _import_target(use: str) -> Any:
    module_name, _, attr = use.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def _takes_max_retries(target: Any) -> bool:
    fields = getattr(target, "model_fields", None)
    if isinstance(fields, dict):
        return "max_retries" in fields
    try:
        return "max_retries" in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False


def _construct(entry: ModelEntry, target: Any) -> Any:
    params = entry.params
    if _takes_max_retries(target):
        params["max_retries"] = 0  # the host's retry layer is the one policy
    return target(**params)


def create_chat_model(config: AppConfig, name: str | None = None) -> BaseChatModel:
    """Instantiate the model called ``name`` (or the default one)."""
    entry = model_entry(config, name)
    if entry is None:
        return EmbeddedChatModel()
    target = _import_target(entry.use)
    model = _construct(entry, merging_model_class(target) or target)
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model {entry.name!r}: {entry.use} did not produce a BaseChatModel")
    return model


def shared_model_factory(config: AppConfig) -> Callable[[str | None], BaseChatModel]:
    """:func:`create_chat_model` for a host that serves many runs: each configured model is
    constructed once and every run gets that instance.

    Why: a provider chat model is a client, not a conversation: what a call needs travels
    with the call, and LangChain runs one instance from many tasks at once. Constructed per
    run, ``ChatOpenAI`` cost ~7 KiB held for the run's life (its validated fields, an
    ``openai`` client and its resource objects; the HTTP pool is shared either way) and its
    validation time, for every open stream. The embedded model is still made per run: it
    counts its calls (``fail_times``), and that count is a run's own.
    """
    made: dict[str | None, BaseChatModel] = {}

    def factory(name: str | None) -> BaseChatModel:
        model = made.get(name)
        if model is None:
            model = create_chat_model(config, name)
            if not isinstance(model, EmbeddedChatModel):
                made[name] = model
        return model

    return factory


#: The LangChain provider packages a ``use:`` usually names: module -> distribution. A hint
#: names only these, never a name made from what was typed: ``pip install`` of a typo is
#: how typosquatted packages get installed.
KNOWN_PROVIDERS: dict[str, str] = {
    "langchain_openai": "langchain-openai",
    "langchain_anthropic": "langchain-anthropic",
    "langchain_google_genai": "langchain-google-genai",
    "langchain_google_vertexai": "langchain-google-vertexai",
    "langchain_aws": "langchain-aws",
    "langchain_mistralai": "langchain-mistralai",
    "langchain_groq": "langchain-groq",
    "langchain_ollama": "langchain-ollama",
    "langchain_deepseek": "langchain-deepseek",
    "langchain_fireworks": "langchain-fireworks",
    "langchain_community": "langchain-community",
}


def _missing_module_advice(module_name: str, missing: str) -> str:
    """What to do when importing ``module_name`` stopped at module ``missing``.

    A known provider: its ``pip install``. A dependency missing inside a known provider:
    reinstall that provider. Anything else (a typo, a package nobody knows): "no module
    named X", the closest known provider module when one is close, and the known provider
    packages; never an install command made from the typed name.
    """
    top = module_name.split(".")[0]
    if missing in KNOWN_PROVIDERS:
        return f"{missing} is not installed; pip install {KNOWN_PROVIDERS[missing]}"
    if top in KNOWN_PROVIDERS and "." not in missing and missing != top:
        return f"{missing} is not installed (needed by {top}); pip install --force-reinstall {KNOWN_PROVIDERS[top]}"
    close = difflib.get_close_matches(missing.split(".")[0], KNOWN_PROVIDERS, n=1, cutoff=0.8)
    mean = f" (did you mean {close[0]}?)" if close else ""
    known = ", ".join(KNOWN_PROVIDERS.values())
    return f"no module named {missing}{mean}; the known provider packages are {known}"


def _first_line(exc: BaseException) -> str:
    return exception_text(exc, one_line=True)


def _entry_problems(index: int, entry: ModelEntry) -> list[tuple[tuple[int | str, ...], str]]:
    here: tuple[int | str, ...] = ("models", index)
    module_name = entry.use.partition(":")[0]
    try:
        target = _import_target(entry.use)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        return [((*here, "use"), f"cannot import {module_name}: {_missing_module_advice(module_name, missing)}")]
    except AttributeError as exc:
        return [((*here, "use"), f"{entry.use} does not exist: {_first_line(exc)}")]
    except Exception as exc:
        return [((*here, "use"), f"cannot import {module_name}: {_first_line(exc)}")]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = _construct(entry, target)
    except ValidationError as exc:
        problems: list[tuple[tuple[int | str, ...], str]] = []
        for error in exc.errors(include_url=False):
            loc = error.get("loc") or ()
            key = str(loc[0]) if loc else None
            field = (*here, key) if key in entry.params else here
            problems.append((field, f"{entry.use}: {error.get('msg', 'invalid')}"))
        return problems
    except Exception as exc:  # missing credentials, a bad argument combination, ...
        return [(here, f"{entry.use} cannot be constructed: {_first_line(exc)}")]
    if not isinstance(model, BaseChatModel):
        return [((*here, "use"), f"{entry.use} is not a LangChain chat model (got {type(model).__name__})")]
    # A key the class does not know is passed on to the provider (LangChain warns and moves it
    # to model_kwargs); the provider then refuses every call. Say so now.
    return [(here, f"{entry.use}: {' '.join(str(w.message).split())}") for w in caught]


def _problems(config: AppConfig) -> list[tuple[tuple[int | str, ...], str]]:
    return [problem for index, entry in enumerate(config.models) for problem in _entry_problems(index, entry)]


def check_models(config: AppConfig, path: str | Path) -> list[str]:
    """One ``file:line: field: cause`` line per problem with ``models:`` (empty: all good)."""
    return [format_problem(path, loc, problem) for loc, problem in _problems(config)]


class ModelUnusable(ConfigError):
    """The file is valid, but a model entry cannot be used here (its package, its arguments,
    its credentials): a different fix from a malformed file, so callers can say which."""


def ensure_models(config: AppConfig, path: str | Path) -> None:
    """:func:`check_models`, raising :class:`ConfigError` (every problem, one line each)."""
    problems = _problems(config)
    if not problems:
        return
    lines = [format_problem(path, loc, problem) for loc, problem in problems]
    loc, problem = problems[0]
    field = ".".join(str(part) for part in loc[2:])
    raise ModelUnusable(
        path, config_line(path, loc), f"models[{loc[1]}]" + (f".{field}" if field else ""), problem, problems=lines
    )


def describe_models(config: AppConfig) -> str:
    """For the startup line: each model, what it is, and the purposes it serves."""
    if not config.models:
        return f"embedded ({EMBEDDED_MODEL_NAME})"
    claimed = {purpose for entry in config.models for purpose in entry.purposes}
    lead = model_name_for(config, "lead") or config.models[0].name
    parts: list[str] = []
    for entry in config.models:
        purposes: Sequence[str] = entry.purposes
        if entry.name == lead:
            purposes = [*purposes, *(p for p in MODEL_PURPOSES if p not in claimed and p not in purposes)]
        model_id = entry.params.get("model") or entry.params.get("model_name") or "?"
        parts.append(f"{entry.name}={entry.use}({model_id}) for {', '.join(purposes) or 'nothing'}")
    return "; ".join(parts)


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
