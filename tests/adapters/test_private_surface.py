"""Other libraries' private names the host leans on, checked against the installed versions.

Each adapter (``deerflow_ext/adapters/``) falls back quietly when its private name is gone,
so the host keeps working; these tests are what makes an upgrade that took the fallback
loud. Every failure names the library and its version.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import sys
from collections.abc import AsyncIterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.adapters import (
    cpython_bytecode,
    fastapi_private,
    importlib_metadata_private,
    langchain_core_private,
    langchain_private,
    langgraph_postgres_private,
    langgraph_private,
    langsmith_private,
)
from deerflow_ext.persistence.asyncpg_form import numbered
from deerflow_ext.persistence.joined_upserts import upsert

SRC = Path(__file__).resolve().parents[2] / "src" / "deerflow_ext"


def _version(distribution: str) -> str:
    return f"{distribution} {metadata.version(distribution)}"


# -- LangChain ---------------------------------------------------------------------------------
def test_langchain_chain_composers_exist_with_one_sequence_parameter() -> None:
    from langchain.agents import factory

    where = f"{_version('langchain')}: langchain.agents.factory"
    for hook, name in langchain_private.LANGCHAIN_COMPOSER_NAMES.items():
        composer = getattr(factory, name, None)
        assert callable(composer), f"{where}.{name} is gone: {hook} runs are no longer fused"
        parameters = list(inspect.signature(composer).parameters)
        assert len(parameters) == 1, f"{where}.{name}{inspect.signature(composer)} no longer takes one sequence"
    assert langchain_private.chain_composers() is not None


def test_langchain_composers_nest_the_first_handler_outermost() -> None:
    composers = langchain_private.chain_composers()
    assert composers is not None, f"{_version('langchain')}: chain composers unavailable"
    calls: list[str] = []

    def outer(request: Any, handler: Any) -> Any:
        calls.append("outer")
        return handler(request)

    def inner(request: Any, handler: Any) -> Any:
        calls.append("inner")
        return handler(request)

    chain = composers["wrap_tool_call"]([outer, inner])
    from langchain_core.messages import ToolMessage

    result = chain("request", lambda request: ToolMessage(content=request, tool_call_id="1"))
    assert calls == ["outer", "inner"], f"{_version('langchain')}: composer nesting changed: {calls}"
    assert isinstance(result, ToolMessage) and result.content == "request"


def test_langchain_wrap_trace_kwargs_still_scrubs_inputs_and_outputs() -> None:
    from langchain.agents.middleware import AgentMiddleware

    kwargs = langchain_private.wrap_trace_kwargs(AgentMiddleware())
    assert kwargs is not None, (
        f"{_version('langchain')}: langchain.agents.factory._wrap_trace_kwargs is gone or changed its answer; "
        "fused groups are no longer carried by the host layer before them"
    )
    assert callable(kwargs["process_inputs"]) and callable(kwargs["process_outputs"])
    scrubbed = kwargs["process_inputs"]({"request": 1, "handler": print, "runtime": object()})
    assert "handler" not in scrubbed and scrubbed.get("request") == 1, f"{_version('langchain')}: {scrubbed!r}"


# -- LangChain core -----------------------------------------------------------------------------
def test_langchain_core_asks_should_stream_with_its_keywords() -> None:
    from langchain_core.language_models import BaseChatModel

    where = f"{_version('langchain-core')}: BaseChatModel.{langchain_core_private.SHOULD_STREAM}"
    assert langchain_core_private.should_stream() is not None, f"{where} is gone or takes other keywords"
    source = inspect.getsource(BaseChatModel._agenerate_with_cache)
    assert f"self.{langchain_core_private.SHOULD_STREAM}(" in source, f"{where} is no longer what ainvoke asks"


def test_langchain_core_chunk_metadata_puts_the_generation_info_under_the_messages_own() -> None:
    from langchain_core.messages import AIMessageChunk
    from langchain_core.outputs import ChatGenerationChunk

    metadata = langchain_core_private.chunk_metadata()
    assert metadata is not None, f"{_version('langchain-core')}: _gen_info_and_msg_metadata is gone"
    chunk = ChatGenerationChunk(
        message=AIMessageChunk(content="", response_metadata={"model_name": "m", "finish_reason": "own"}),
        generation_info={"finish_reason": "stop", "logprobs": None},
    )
    assert metadata(chunk) == {"finish_reason": "own", "logprobs": None, "model_name": "m"}


# -- LangGraph ---------------------------------------------------------------------------------
def test_langgraph_state_channels_are_the_graphs_own() -> None:
    from langchain.agents.middleware import AgentState
    from langgraph.channels.binop import BinaryOperatorAggregate
    from langgraph.channels.last_value import LastValue
    from langgraph.graph import StateGraph
    from langgraph.graph.message import add_messages

    where = f"{_version('langgraph')}: langgraph.graph.state._get_channels"
    channels = langgraph_private.state_channels(AgentState)
    assert channels is not None, f"{where} is gone or answers in another shape: host node hooks no longer fuse"
    messages = channels["messages"]
    assert isinstance(messages, BinaryOperatorAggregate) and messages.operator is add_messages, where
    assert isinstance(channels["structured_response"], LastValue), where
    graph_channels = StateGraph(AgentState).channels  # what a compiled graph itself uses
    assert {k: type(v) for k, v in channels.items()} == {k: type(graph_channels[k]) for k in channels}, where


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_langgraph_create_agent_model_node_can_be_bracketed(mode: str) -> None:
    """``create_agent``'s ``model`` node is a ``RunnableCallable`` of two functions taking
    ``runtime``; a bracket around it gets that node's function, the state and the runtime."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from deerflow_ext.agents.embedded_model import EmbeddedChatModel

    where = f"{_version('langgraph')}, {_version('langchain')}: the model node"
    graph = create_agent(EmbeddedChatModel(), [], checkpointer=InMemorySaver())
    assert langgraph_private.bracketable(graph, "model"), f"{where} is no longer bracketable: nothing is bracketed"
    seen: list[Any] = []

    def run(node: Any, state: Any, runtime: Any) -> Any:
        seen.append((len(state["messages"]), runtime.context))
        return node(state, runtime)

    async def arun(node: Any, state: Any, runtime: Any) -> Any:
        seen.append((len(state["messages"]), runtime.context))
        return await node(state, runtime)

    assert langgraph_private.bracket_node(graph, "model", run, arun), f"{where} is no longer a bracketable runnable"
    payload, config = {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t"}}
    if mode == "sync":
        final = graph.invoke(payload, config, context={"k": 1})
    else:
        final = await graph.ainvoke(payload, config, context={"k": 1})
    assert seen == [(1, {"k": 1})], where
    assert final["messages"][-1].content == "Here is my answer to: hello", where
    assert not langgraph_private.bracket_node(graph, "no such node", run, arun)


def test_langgraph_postgres_saver_writes_only_through_its_pipelined_cursor_in_upserts() -> None:
    """The checkpointer batches what ``put``/``put_writes`` send (``pg_saver``): they must
    still write through ``_cursor(pipeline=True)`` with ``execute``/``executemany`` alone,
    and each statement must be an upsert (a batch re-sends writes one by one after a failure)."""
    from langgraph.checkpoint.base import empty_checkpoint
    from psycopg_pool import ConnectionPool

    where = f"{_version('langgraph-checkpoint-postgres')}: PostgresSaver"
    assert langgraph_postgres_private.recording_available(), f"{where}._cursor(pipeline=...) is gone: no batching"
    pool: Any = ConnectionPool("postgresql://nobody@127.0.0.1:1/none", open=False)  # nothing is sent
    saver = langgraph_postgres_private.RecordingPostgresSaver(pool)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"items": [1, 2], "count": 3}
    checkpoint["channel_versions"] = {"items": "1", "count": "1"}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    try:
        saved, put = saver.record(saver.put, config, checkpoint, {"step": 1}, {"items": "1", "count": "1"})
        _, writes = saver.record(saver.put_writes, saved, [("items", 3), ("__error__", "boom")], "task", "")
        _, special = saver.record(saver.put_writes, saved, [("__error__", "boom")], "task", "")
    except langgraph_postgres_private.NotRecordable as exc:
        raise AssertionError(f"{where} now does more with its cursor than write: {exc}") from None
    assert saved["configurable"]["checkpoint_id"] == checkpoint["id"], where
    assert [len(statement.rows) for statement in put] == [1, 1], f"{where}.put: {put}"  # one blob, one row
    assert [len(statement.rows) for statement in writes + special] == [2, 1], f"{where}.put_writes"
    for statement in put + writes + special:
        assert "ON CONFLICT" in statement.query, f"{where} sends a statement that is no upsert: {statement.query}"
        # A batch goes as one statement only when every statement is of the form it joins.
        assert upsert(numbered(statement.query)) is not None, f"{where}: not joinable: {statement.query}"


def test_langgraph_postgres_saver_reads_a_checkpoint_with_the_query_and_row_loader_we_mirror() -> None:
    """The checkpointer sends ``get_tuple``'s query from the loop and has LangGraph load the
    row (``pg_loop_reads``): ``get_tuple`` must still send ``SELECT_SQL`` with the ``WHERE``
    we send, and ``_load_checkpoint_tuple`` must still make the tuple of such a row."""
    import inspect

    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    where = f"{_version('langgraph-checkpoint-postgres')}: PostgresSaver"
    assert langgraph_postgres_private.loading_available(), f"{where}._load_checkpoint_tuple is gone"
    pool: Any = ConnectionPool("postgresql://nobody@127.0.0.1:1/none", open=False)  # nothing is sent
    saver = langgraph_postgres_private.RecordingPostgresSaver(pool)
    source = inspect.getsource(PostgresSaver.get_tuple)
    latest = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    exact = {"configurable": {**latest["configurable"], "checkpoint_id": "c-2"}}
    for config, values in ((latest, ("t", "")), (exact, ("t", "", "c-2"))):
        statement = saver.read_statement(config)
        assert statement.query.startswith(PostgresSaver.SELECT_SQL), where
        clause = statement.query.removeprefix(PostgresSaver.SELECT_SQL)
        assert f'"{clause}"' in source, f"{where}.get_tuple no longer reads with {clause!r}"
        assert statement.rows == (values,), where
    kind, blob = saver.serde.dumps_typed([1, 2])
    checkpoint: dict[str, Any] = {**empty_checkpoint(), "id": "c-2", "v": 4, "channel_versions": {"items": "1"}}
    row = {  # as psycopg's dict rows hold it: JSON decoded, arrays of bytea as lists of bytes
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c-2",
        "parent_checkpoint_id": "c-1",
        "checkpoint": {**checkpoint, "channel_values": {}},
        "metadata": {"step": 2},
        "channel_values": [[b"items", kind.encode(), blob]],
        "pending_writes": [[b"task", b"items", kind.encode(), blob, b"~", b"0"]],
    }
    loaded = saver.loaded(row)
    assert loaded.config == exact, where
    assert loaded.checkpoint["channel_values"] == {"items": [1, 2]}, where
    assert loaded.metadata == {"step": 2}, where
    assert loaded.parent_config == {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c-1"}}
    assert loaded.pending_writes == [("task", "items", [1, 2])], where


# -- FastAPI / Starlette -----------------------------------------------------------------------
def _versions() -> str:
    return f"{_version('fastapi')}, {_version('starlette')}"


def test_fastapi_included_routers_are_seen_through_with_their_prefix() -> None:
    from fastapi import APIRouter

    child = APIRouter()
    child.add_api_route("/leaf", lambda: None, methods=["GET"])
    parent = APIRouter()
    parent.include_router(child, prefix="/child")
    found = [fastapi_private.included_router(route) for route in parent.routes]
    if all(item is None for item in found):
        # Older FastAPI copies the routes in, prefixed: nothing to see through.
        assert [getattr(route, "path", None) for route in parent.routes] == ["/child/leaf"], _versions()
        return
    (router, prefix), *_ = [item for item in found if item is not None]
    assert router is child and prefix == "/child", f"{_versions()}: _IncludedRouter changed shape"


def test_starlette_default_lifespan_is_recognised() -> None:
    from fastapi import APIRouter

    assert fastapi_private.is_default_lifespan(APIRouter().lifespan_context), (
        f"{_versions()}: starlette.routing._DefaultLifespan is gone or renamed; "
        "every contributed router would now be refused as carrying a lifespan"
    )


def test_fastapi_merged_lifespans_are_seen_through() -> None:
    from fastapi import APIRouter

    @contextlib.asynccontextmanager
    async def own(app: Any) -> AsyncIterator[None]:
        yield

    parent, child = APIRouter(), APIRouter(lifespan=own)
    parent.include_router(child)
    parts = list(fastapi_private.merged_lifespan_parts(parent.lifespan_context))
    assert len(parts) == 2, f"{_versions()}: fastapi.routing._merge_lifespan_context changed shape"
    assert any(part is own for part in parts) or any(
        getattr(part, "__wrapped__", None) is getattr(own, "__wrapped__", own) for part in parts
    ), f"{_versions()}: the merged lifespan no longer holds the child's"
    assert list(fastapi_private.merged_lifespan_parts(own)) == []


def test_fastapi_builds_an_included_route_when_asked_and_fails_there_on_a_bad_one() -> None:
    from fastapi import APIRouter, FastAPI
    from fastapi import routing as fastapi_routing

    app = FastAPI()
    child = APIRouter()
    child.add_api_route("/leaf", lambda: None, methods=["GET"])
    child.routes[-1].endpoint = None  # type: ignore[attr-defined]
    before = len(app.router.routes)
    try:
        app.include_router(child)  # older FastAPI builds here...
        fastapi_private.build_included_routes(app.router.routes[before:])  # ...newer ones here
    except Exception as exc:
        assert "callable" in str(exc), f"{_versions()}: {exc!r}"
    else:
        raise AssertionError(f"{_versions()}: a route that cannot be built was built")
    lazy = hasattr(fastapi_routing, "iter_route_contexts")
    assert callable(getattr(app.router, "_mark_routes_changed", None)) or not lazy, (
        f"{_versions()}: APIRouter._mark_routes_changed is gone; an undone include would leave stale routes"
    )
    fastapi_private.routes_changed(app.router)


# -- langsmith ---------------------------------------------------------------------------------
def test_langsmith_runtime_overrides_can_be_read_back() -> None:
    import langsmith

    previous = langsmith_private.installed_aio_to_thread()
    assert previous is not langsmith_private.UNREADABLE, (
        f"{_version('langsmith')}: langsmith._runtime_overrides.get_runtime_overrides().aio_to_thread is gone; "
        "untraced runs pay langsmith's thread hop again"
    )
    assert "aio_to_thread" in inspect.signature(langsmith.set_runtime_overrides).parameters, _version("langsmith")


# -- importlib_metadata ------------------------------------------------------------------------
def test_importlib_metadata_distributions_know_their_metadata_directory() -> None:
    import importlib_metadata

    dist = importlib_metadata.distribution("pluggy")
    path = importlib_metadata_private.metadata_directory(dist)
    assert path is not None, (
        f"{_version('importlib-metadata')}: PathDistribution._path is gone; "
        "a same-version reinstall is no longer reported"
    )
    assert path.is_dir() and path.name.startswith("pluggy") and path.suffix in (".dist-info", ".egg-info")


# -- CPython bytecode --------------------------------------------------------------------------
def test_cpython_bytecode_tells_a_suspending_coroutine_from_one_that_cannot() -> None:
    where = f"Python {sys.version.split()[0]} ({sys.implementation.name})"
    assert cpython_bytecode.YIELD_VALUE is not None, f"{where}: no YIELD_VALUE opcode; every hook now 'may suspend'"

    async def plain() -> int:
        return 1

    async def awaits() -> None:
        await asyncio.sleep(0)

    async def iterates(items: Any) -> None:
        async for _ in items:
            pass

    def sync() -> None:
        return None

    assert cpython_bytecode.never_suspends(plain), where
    assert not cpython_bytecode.never_suspends(awaits), where
    assert not cpython_bytecode.never_suspends(iterates), where
    assert not cpython_bytecode.never_suspends(sync)
    assert not cpython_bytecode.never_suspends(print)


# -- nobody else reaches for them --------------------------------------------------------------
def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in ("deerflow_ext", "deerflow_extension_api", "__future__"):
                continue
            private_module = any(part.startswith("_") for part in node.module.split("."))
            private_names = [alias.name for alias in node.names if alias.name.startswith("_")]
            if private_module or private_names:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} from {node.module} import ...")
    return found


def test_no_host_module_outside_the_adapters_imports_a_private_name() -> None:
    offenders = [
        line
        for path in sorted(SRC.rglob("*.py"))
        if "adapters" not in path.relative_to(SRC).parts and "template" not in path.relative_to(SRC).parts
        for line in _private_imports(path)
    ]
    assert offenders == [], "private names of other libraries belong in deerflow_ext/adapters/: " + "; ".join(offenders)


@pytest.mark.parametrize("name", ["_DefaultLifespan", "_IncludedRouter", "_merge_lifespan_context", "_path"])
def test_private_names_matched_as_text_live_only_in_the_adapters(name: str) -> None:
    holders = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "adapters" not in path.relative_to(SRC).parts and f'"{name}"' in path.read_text(encoding="utf-8")
    )
    assert holders == [], f"{name} is matched outside deerflow_ext/adapters/: {holders}"
