"""LangChain core's private streaming route in ``BaseChatModel`` (``langchain_core``).

Used by ``agents/merged_stream.py``, which streams a configured model's reply while merging
its chunks as they come:

* ``BaseChatModel._should_stream(*, async_api, run_manager=None, **kwargs) -> bool`` — what
  ``ainvoke`` asks (``_agenerate_with_cache``) before it streams a reply through LangChain's
  own loop, which keeps every chunk until the reply ends. A model class that answers False
  there for an ``ainvoke`` gets its ``_agenerate`` called with the run manager instead.
* ``langchain_core.language_models.chat_models._gen_info_and_msg_metadata(chunk) -> dict``
  — the ``response_metadata`` LangChain's loop gives every streamed chunk (its generation
  info, minus LangSmith's gateway key, under the message's own metadata), so a merged
  stream's chunks are the ones LangChain would have streamed.

Fallback: without either name (or with other keywords on ``_should_stream``) no model is
given the merging route: replies stream through LangChain's loop, which only costs memory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["SHOULD_STREAM", "chunk_metadata", "should_stream"]

#: The method ``ainvoke`` asks whether to stream through LangChain's chunk-keeping loop.
SHOULD_STREAM = "_should_stream"

_KEYWORDS = frozenset({"async_api", "run_manager"})


def should_stream() -> Callable[..., bool] | None:
    """``BaseChatModel._should_stream`` (called as ``(model, async_api=, run_manager=,
    **kwargs)``), or ``None`` when this LangChain lacks it or takes other keywords."""
    from langchain_core.language_models import BaseChatModel

    method: Callable[..., bool] | None = getattr(BaseChatModel, SHOULD_STREAM, None)
    if method is None or not callable(method):
        return None
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return None
    keywords = {name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    if not _KEYWORDS <= keywords or not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return method


def chunk_metadata() -> Callable[[Any], dict[str, Any]] | None:
    """The ``response_metadata`` LangChain's streaming loop sets on each chunk, or ``None``."""
    try:
        from langchain_core.language_models.chat_models import _gen_info_and_msg_metadata
    except ImportError:
        return None
    return _gen_info_and_msg_metadata if callable(_gen_info_and_msg_metadata) else None
