"""A configured model's streamed reply is merged as it arrives: LangGraph's messages stream and
the final message are what LangChain's own loop gives, while the reply holds a few chunks,
not all of them (``agents/merged_stream.py``)."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph

from deerflow_ext.agents.embedded_model import EmbeddedChatModel
from deerflow_ext.agents.merged_stream import FOLD, merging_model_class
from deerflow_ext.agents.models import create_chat_model
from deerflow_ext.config.schema import AppConfig
from fake_openai import FakeOpenAI

TOKENS = 3 * FOLD + 5
_alive: list[weakref.ref[ChatGenerationChunk]] = []
_most_alive: list[int] = []


def _script() -> Iterator[ChatGenerationChunk]:
    """Words, a tool call in two pieces, then usage: what a provider streams."""
    for n in range(TOKENS):
        info = {"finish_reason": None} if n == 0 else None
        yield ChatGenerationChunk(message=AIMessageChunk(content=f"w{n} ", id="prov-1"), generation_info=info)
    for args in ('{"q": ', '"x"}'):
        call = {"name": "search" if args.startswith("{") else None, "args": args, "id": "call-1", "index": 0}
        yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[call]))  # type: ignore[list-item]
    usage = {"input_tokens": 3, "output_tokens": TOKENS, "total_tokens": TOKENS + 3}
    yield ChatGenerationChunk(
        message=AIMessageChunk(content="", usage_metadata=usage, response_metadata={"model_name": "m"}),  # type: ignore[arg-type]
        generation_info={"finish_reason": "tool_calls"},
    )


class Scripted(BaseChatModel):
    """A provider model that streams :func:`_script`, noting how many of the chunks it
    already gave out are still alive each time it gives the next one."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="not streamed"))])

    async def _astream(self, messages: Any, stop: Any = None, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _script():
            _most_alive.append(sum(ref() is not None for ref in _alive))
            _alive.append(weakref.ref(chunk))
            yield chunk


def _same_ids(value: Any) -> Any:
    """LangChain's run ids (``lc_run-<uuid>``) differ between two runs; everything else must not."""
    if isinstance(value, dict):
        return {key: _same_ids(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_same_ids(item) for item in value]
    return "lc_run" if isinstance(value, str) and value.startswith("lc_run-") else value


async def _stream(model: BaseChatModel) -> tuple[list[Any], Any, int]:
    """LangGraph's messages stream of one model call, its final message, and the most chunks
    the reply held at once."""
    _alive.clear()
    _most_alive.clear()

    async def call(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState).add_node("call", call).add_edge(START, "call").compile()
    streamed: list[Any] = []
    final: Any = None
    async for mode, part in graph.astream(
        {"messages": [HumanMessage("hi", id="h")]}, stream_mode=["messages", "values"]
    ):
        if mode == "messages":
            message, meta = part
            streamed.append((type(message).__name__, message.model_dump(), meta["langgraph_node"]))
        else:
            final = part["messages"][-1].model_dump()
    return _same_ids(streamed), _same_ids(final), max(_most_alive, default=0)


async def test_the_merged_route_streams_and_answers_as_langchains_loop_while_holding_a_few_chunks() -> None:
    merging = merging_model_class(Scripted)
    assert merging is not None and issubclass(merging, Scripted) and merging.__name__ == "Scripted"
    theirs, their_final, their_most = await _stream(Scripted())
    ours, our_final, our_most = await _stream(merging())
    assert len(theirs) == TOKENS + 4  # words, the call's two pieces, usage, LangChain's last chunk
    assert ours == theirs
    assert our_final == their_final
    assert their_final["tool_calls"] == [{"name": "search", "args": {"q": "x"}, "id": "call-1", "type": "tool_call"}]
    assert their_final["usage_metadata"]["total_tokens"] == TOKENS + 3
    assert their_most >= TOKENS, "LangChain's loop keeps every chunk until the reply ends"
    assert our_most <= FOLD + 1, f"the merged route held {our_most} chunks at once"


async def test_an_invoke_without_streaming_and_astream_keep_langchains_paths() -> None:
    merging = merging_model_class(Scripted)
    assert merging is not None
    assert (await merging().ainvoke("hi")).content == "not streamed"
    chunks = [chunk async for chunk in merging().astream("hi")]
    assert "".join(str(c.content) for c in chunks).startswith("w0 w1 ")


def test_only_streaming_chat_model_classes_get_a_merging_class() -> None:
    assert merging_model_class(Scripted) is merging_model_class(Scripted)
    assert merging_model_class(EmbeddedChatModel) is None, "the embedded model does not stream: nothing to merge"
    assert merging_model_class(dict) is None
    assert merging_model_class(len) is None  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_a_configured_provider_model_streams_through_the_merged_route() -> None:
    with FakeOpenAI(reply=lambda _: " ".join(f"t{n}" for n in range(3 * FOLD))) as fake:
        config = AppConfig.model_validate(
            {"models": [{"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "m", "api_key": "k",
                         "base_url": fake.base_url, "stream_usage": True}]}
        )  # fmt: skip
        model = create_chat_model(config)
        assert isinstance(model, ChatOpenAI) and type(model) is merging_model_class(ChatOpenAI)
        streamed, final, _ = await _stream(model)
    assert "".join(part[1]["content"] for part in streamed) == " ".join(f"t{n}" for n in range(3 * FOLD))
    assert final["content"] == " ".join(f"t{n}" for n in range(3 * FOLD))
    assert final["usage_metadata"]["output_tokens"] > 0
    assert streamed[-1][1]["chunk_position"] == "last"
