"""``store.index`` resolved: the embedding model, its dimension, the fields embedded.

``embed`` takes the three forms LangGraph's server takes, told apart in this order:

* ``./file.py:attr`` (or any path ending ``.py``), relative to config.yaml's folder;
* ``module:attr`` when ``module`` imports and has ``attr`` — an ``Embeddings`` object, an
  ``Embeddings`` class (made with no arguments), or a function of a list of texts (sync or
  ``async``) returning one vector per text;
* otherwise ``provider:model``, through LangChain's ``init_embeddings`` (its provider package
  must be installed: ``openai:text-embedding-3-small`` needs ``langchain-openai``).

Why resolve at startup: an operator's typo must stop the Gateway with one line naming the
file and field, not fail the first ``put_item`` an hour later.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base.embed import ensure_embeddings, tokenize_path

from deerflow_ext.config.loading import ConfigError, config_line
from deerflow_ext.config.python_files import import_python_file, names_a_file
from deerflow_ext.config.schema import AppConfig, StoreIndexConfig

__all__ = ["StoreIndex", "StoreIndexError", "load_store_index", "store_index_of"]


class StoreIndexError(ValueError):
    """``store.index`` cannot be used; ``field`` is the key at fault (``embed``, ``fields``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


@dataclass(frozen=True, eq=False)
class StoreIndex:
    """What the store embeds with: ``embeddings`` (LangChain's interface), vectors of
    ``dims`` numbers, the texts at ``fields`` of a value. ``native_async``: the model's own
    ``aembed_*`` does its work without blocking (an ``async`` function, a provider client);
    otherwise the sync methods run on a worker thread."""

    embeddings: Embeddings
    dims: int
    fields: tuple[str, ...]
    native_async: bool
    source: str


def _load_attr(embed: str, base: Path) -> Any | None:
    """The object ``embed`` names as a file or module path; None when it names neither."""
    target, _, attr = embed.rpartition(":")
    if names_a_file(target):
        path = Path(target)
        if not path.is_absolute():
            path = base / path
        try:
            module = import_python_file(path, "deerflow_store_embed_")
        except FileNotFoundError:
            raise StoreIndexError("embed", f"{embed!r}: no file {path}") from None
        except Exception as exc:
            raise StoreIndexError("embed", f"{embed!r}: importing {path} raised {type(exc).__name__}: {exc}") from None
        if not hasattr(module, attr):
            raise StoreIndexError("embed", f"{embed!r}: {path} has no {attr!r}")
        return getattr(module, attr)
    if not attr.replace(".", "_").isidentifier():
        return None  # "openai:text-embedding-3-small": a provider's model
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return None
    try:
        value: Any = importlib.import_module(target)
    except Exception as exc:
        raise StoreIndexError("embed", f"{embed!r}: importing {target} raised {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(value, part):
            return None
        value = getattr(value, part)
    return value


_INDEX_TOKEN = re.compile(r"^\[(\*|-?\d+)\]$")


def _path_problem(path: str) -> str | None:
    """Why ``path`` is no JSON path LangGraph's extractor reads (it reads any text, quietly
    matching nothing for ``a[x``), or None."""
    if not path.strip():
        return "it is empty"
    if path == "$":
        return None
    try:
        tokens = tokenize_path(path)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    for token in tokens:
        if token.startswith("["):
            if not _INDEX_TOKEN.match(token):
                return f"{token!r} is no [index], [-index] or [*]"
        elif token.startswith("{"):
            if not token.endswith("}") or len(token) < 3:
                return f"{token!r} is no {{field,...}} selection"
        elif any(mark in token for mark in "[]{}"):
            return f"{token!r} has an unmatched bracket"
    return None


def _native_async(obj: Any) -> bool:
    if inspect.iscoroutinefunction(obj):
        return True
    if isinstance(obj, Embeddings):
        return type(obj).aembed_documents is not Embeddings.aembed_documents
    return False


def _embeddings(obj: Any, embed: str) -> tuple[Embeddings, bool]:
    if isinstance(obj, type) and issubclass(obj, Embeddings):
        try:
            obj = obj()
        except Exception as exc:
            raise StoreIndexError("embed", f"{embed!r}: {obj.__name__}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, Embeddings) and not callable(obj):
        raise StoreIndexError("embed", f"{embed!r} is a {type(obj).__name__}, not an Embeddings object or a function")
    return ensure_embeddings(obj), _native_async(obj)


def load_store_index(config: StoreIndexConfig | None, *, base: Path) -> StoreIndex | None:
    """``config`` resolved (``base``: config.yaml's folder); None when there is no index.
    :class:`StoreIndexError` names the field at fault."""
    if config is None:
        return None
    for position, field in enumerate(config.fields):
        problem = _path_problem(field)
        if problem:
            raise StoreIndexError(f"fields[{position}]", f"{field!r} is not a JSON path: {problem}")
    obj = _load_attr(config.embed, base)
    if obj is None:
        factory: Callable[[str], Embeddings]
        try:
            from langchain.embeddings import init_embeddings as factory
        except ImportError as exc:  # pragma: no cover - langchain is a dependency
            raise StoreIndexError("embed", f"{config.embed!r}: LangChain's init_embeddings is missing: {exc}") from None
        try:
            embeddings = factory(config.embed)
        except Exception as exc:
            raise StoreIndexError(
                "embed",
                f"{config.embed!r} is no module:attr, ./file.py:attr, nor a provider:model init_embeddings accepts "
                f"({type(exc).__name__}: {exc})",
            ) from None
        return StoreIndex(embeddings, config.dims, tuple(config.fields), True, config.embed)
    embeddings, native = _embeddings(obj, config.embed)
    return StoreIndex(embeddings, config.dims, tuple(config.fields), native, config.embed)


def store_index_of(config: AppConfig, config_file: str | Path) -> StoreIndex | None:
    """``config.store.index`` resolved against ``config_file``'s folder; a bad one is a
    :class:`ConfigError` (``config.yaml:LINE: store.index.embed: ...``) that stops startup."""
    try:
        return load_store_index(config.store.index, base=Path(config_file).parent)
    except StoreIndexError as exc:
        name, _, position = exc.field.partition("[")
        loc: tuple[int | str, ...] = ("store", "index", name, *((int(position.rstrip("]")),) if position else ()))
        raise ConfigError(config_file, config_line(config_file, loc), f"store.index.{exc.field}", exc.problem) from None
