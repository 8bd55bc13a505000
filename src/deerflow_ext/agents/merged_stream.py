"""A configured chat model whose streamed reply is merged as it arrives, not at its end.

Why: when LangGraph streams a run's messages, every model call goes through LangChain's
streaming loop, which keeps each chunk of the reply (a ``ChatGenerationChunk``, its
``AIMessageChunk`` and a metadata dict: ~2.5 KiB a token) until the reply ends, to merge
them then. That list was most of what an open streaming conversation held in the Gateway
(257 of ~400 KiB halfway through a 200-token reply; ``benchmarks/stream_memory.py``).

:func:`merging_model_class` gives a provider class a subclass, with the same name, that
streams those calls itself: each chunk gets the metadata and id LangChain's loop gives it
and goes to the callbacks (LangGraph's messages stream) the same way, and every
:data:`FOLD` chunks are merged into the reply so far with LangChain's own chunk addition;
the result is LangChain's ``generate_from_stream`` of that. Clients see the same events and
the same final message; the Gateway holds one merged chunk and at most :data:`FOLD` others.

Only what LangChain's loop would have streamed takes this route: an ``ainvoke`` with a
streaming handler (or ``streaming=True``) on a class that implements ``_astream``, with the
default ``output_version``. ``astream``, a call with an explicit ``stream=``, the sync path and
LangChain's content-block (v2) route are untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from deerflow_ext.adapters import langchain_core_private
from deerflow_ext.memo import ClassMemo

__all__ = ["FOLD", "merging_model_class"]

#: Chunks kept before they are merged into the reply so far: one merge per FOLD tokens keeps
#: the merging's cost at LangChain's (one addition over the whole list at the end) while an
#: open reply holds ~FOLD chunks, not all of them.
FOLD = 16

_RUN_ID_PREFIX = "lc_run-"  # the id LangChain's loop gives a chunk that has none


def _routes(model: BaseChatModel, kwargs: dict[str, Any]) -> bool:
    """Whether an ``ainvoke`` that LangChain would stream is one this route streams instead."""
    return "stream" not in kwargs and model.output_version in (None, "v0")


_Metadata = Callable[[ChatGenerationChunk], dict[str, Any]]


async def _merged(
    chunks: AsyncIterator[ChatGenerationChunk], run_manager: AsyncCallbackManagerForLLMRun, metadata: _Metadata
) -> ChatResult:
    run_id = f"{_RUN_ID_PREFIX}{run_manager.run_id}"
    reply: ChatGenerationChunk | None = None
    kept: list[ChatGenerationChunk] = []
    last: ChatGenerationChunk | None = None
    async for chunk in chunks:
        chunk.message.response_metadata = metadata(chunk)
        if chunk.message.id is None:
            chunk.message.id = run_id
        await run_manager.on_llm_new_token(chunk.message.content, chunk=chunk)
        kept.append(chunk)
        last = chunk
        if len(kept) == FOLD:
            reply = kept[0] + kept[1:] if reply is None else reply + kept
            kept = []
    if last is not None and isinstance(last.message, AIMessageChunk) and not last.message.chunk_position:
        # LangChain's loop ends a reply with an empty chunk saying it is the last one.
        content: Any = "" if isinstance(last.message.content, str) else []
        end = ChatGenerationChunk(message=AIMessageChunk(content=content, chunk_position="last", id=run_id))
        await run_manager.on_llm_new_token("", chunk=end)
        kept.append(end)
    parts = kept if reply is None else [reply, *kept]
    return generate_from_stream(iter(parts))


def _build(cls: type[BaseChatModel], metadata: _Metadata) -> type[BaseChatModel]:
    def should_stream(self: BaseChatModel, *, async_api: bool, run_manager: Any = None, **kwargs: Any) -> bool:
        streams: bool = getattr(super(merging, self), langchain_core_private.SHOULD_STREAM)(
            async_api=async_api, run_manager=run_manager, **kwargs
        )
        if streams and async_api and run_manager is not None and _routes(self, kwargs):
            return False  # _agenerate below streams it
        return streams

    async def _agenerate(
        self: BaseChatModel,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        parent: Any = super(merging, self)
        if run_manager is not None and _routes(self, kwargs):
            asks = getattr(parent, langchain_core_private.SHOULD_STREAM)
            if asks(async_api=True, run_manager=run_manager, **kwargs):
                return await _merged(self._astream(messages, stop=stop, **kwargs), run_manager, metadata)
        result: ChatResult = await parent._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        return result

    namespace = {
        langchain_core_private.SHOULD_STREAM: should_stream,
        "_agenerate": _agenerate,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    merging: type[BaseChatModel] = type(cls.__name__, (cls,), namespace)
    return merging


def _make(cls: type) -> type[BaseChatModel] | None:
    if not issubclass(cls, BaseChatModel):
        return None
    if cls._astream is BaseChatModel._astream:  # nothing to stream from: LangChain would not stream
        return None
    metadata = langchain_core_private.chunk_metadata()
    if langchain_core_private.should_stream() is None or metadata is None:
        return None
    return _build(cls, metadata)


_classes: ClassMemo[type[BaseChatModel] | None] = ClassMemo(_make)


def merging_model_class(cls: type) -> type[BaseChatModel] | None:
    """``cls``'s merging subclass (one per class), or ``None`` when ``cls`` is not a chat
    model class that streams, or this LangChain lacks the route (see the adapter)."""
    return _classes.load(cls) if isinstance(cls, type) else None
