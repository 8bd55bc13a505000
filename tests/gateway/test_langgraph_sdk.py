"""The Gateway driven only through ``langgraph_sdk``, the official LangGraph Platform client.

Every request here is made by the SDK's sync or async client against a real Gateway on
loopback (real AgentHost, embedded model, SQLite; ``sdk_server``): assistants, threads and
their state and history, runs in every stream mode, wait, join, join_stream, cancel, list,
the multitask strategies, and a stream dropped mid-run and resumed with ``Last-Event-ID``
that receives every event exactly once. If the SDK changes what it sends or parses, these
tests are where it shows.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from sdk_server import CuttingProxy, SdkServer, sdk_server

from deerflow_ext.gateway.schemas import RunCreate
from deerflow_ext.testing import wait_for

pytestmark = pytest.mark.e2e

RUN_END = ("success", "error", "interrupted")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    with sdk_server(tmp_path_factory.mktemp("sdk"), sse_heartbeat_seconds=0.5) as running:
        yield running


@pytest.fixture
def client(server: SdkServer) -> Any:
    return get_sync_client(url=server.url, api_key=None)


@pytest.fixture
def aclient(server: SdkServer) -> Any:
    return get_client(url=server.url, api_key=None)


def human(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text, **extra}]}


def run_status(client: Any, thread_id: str, run_id: str) -> str:
    return str(client.runs.get(thread_id, run_id)["status"])


# ---------------------------------------------------------------------------- assistants


def test_assistants_search_get_schemas_and_graph(client: Any) -> None:
    found = client.assistants.search()
    assert [a["assistant_id"] for a in found] == ["lead_agent"]
    assert found[0]["graph_id"] == "lead_agent"
    assert client.assistants.search(graph_id="other") == []
    assert client.assistants.count() == 1
    lead = client.assistants.get("lead_agent")
    assert lead["name"] == "lead_agent" and lead["version"] == 1
    with pytest.raises(NotFoundError):
        client.assistants.get("nobody")
    schemas = client.assistants.get_schemas("lead_agent")
    assert "messages" in schemas["input_schema"]["properties"]
    drawing = client.assistants.get_graph("lead_agent")
    assert {"model"} <= {node["id"] for node in drawing["nodes"]}


# ---------------------------------------------------------------------------- threads


def test_threads_create_get_update_search_count_delete(client: Any) -> None:
    tag = SdkServer.gate()
    first = client.threads.create(metadata={"suite": tag, "n": 1})
    second = client.threads.create(metadata={"suite": tag, "n": 2})
    assert first["status"] == "idle" and first["metadata"] == {"suite": tag, "n": 1}
    assert client.threads.get(first["thread_id"])["thread_id"] == first["thread_id"]

    updated = client.threads.update(first["thread_id"], metadata={"n": 10, "extra": True})
    assert updated["metadata"] == {"suite": tag, "n": 10, "extra": True}

    found = client.threads.search(metadata={"suite": tag}, sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in found] == [first["thread_id"], second["thread_id"]]
    assert [t["thread_id"] for t in client.threads.search(metadata={"suite": tag, "n": 2})] == [second["thread_id"]]
    page = client.threads.search(metadata={"suite": tag}, limit=1, offset=1, sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in page] == [second["thread_id"]]
    assert client.threads.search(metadata={"suite": tag}, status="busy") == []
    assert client.threads.count(metadata={"suite": tag}) == 2
    selected = client.threads.search(metadata={"suite": tag}, select=["thread_id", "status"])
    assert all(set(t) == {"thread_id", "status"} for t in selected)

    client.threads.delete(second["thread_id"])
    with pytest.raises(NotFoundError):
        client.threads.get(second["thread_id"])


def test_a_threads_metadata_comes_back_whole_whatever_its_keys(client: Any, server: SdkServer) -> None:
    """Keys starting with ``_sa`` included: FastAPI's response encoder drops those (its guard
    for SQLAlchemy objects); thread answers are sent as made (``routes.threads._answer``)."""
    tag = SdkServer.gate()
    metadata = {"suite": tag, "_sa_note": "kept", "nested": {"_sa": 1}}
    made = client.threads.create(metadata=metadata)
    assert made["metadata"] == metadata
    assert client.threads.get(made["thread_id"])["metadata"] == metadata
    assert client.threads.update(made["thread_id"], metadata={"n": 1})["metadata"] == {**metadata, "n": 1}
    assert [t["metadata"] for t in client.threads.search(metadata={"suite": tag})] == [{**metadata, "n": 1}]
    listed = httpx.get(f"{server.url}/threads", params={"limit": 1000}, timeout=10).json()  # the SDK has no list
    assert {**metadata, "n": 1} in [t["metadata"] for t in listed]


def test_thread_create_with_id_and_if_exists(client: Any) -> None:
    thread_id = f"t-{SdkServer.gate()}"
    made = client.threads.create(thread_id=thread_id, metadata={"a": 1})
    assert made["thread_id"] == thread_id
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=thread_id)
    again = client.threads.create(thread_id=thread_id, if_exists="do_nothing", metadata={"a": 2})
    assert again["metadata"] == {"a": 1}


def test_state_history_and_update_state(client: Any) -> None:
    thread = client.threads.create()
    thread_id = thread["thread_id"]
    empty = client.threads.get_state(thread_id)
    assert empty["values"] == {} and empty["checkpoint"] is None

    result = client.runs.wait(thread_id, "lead_agent", input=human("hello there", id="h-1"))
    messages = result["messages"]
    assert [m["type"] for m in messages] == ["human", "ai"]
    assert messages[0]["id"] == "h-1"  # the client's message id is kept

    state = client.threads.get_state(thread_id)
    assert state["values"]["messages"] == messages
    assert state["next"] == [] and state["checkpoint"]["thread_id"] == thread_id
    assert state["metadata"]["run_id"] and state["metadata"]["graph_id"] == "lead_agent"
    # the thread's values (a chat UI lists threads by their first message) and title
    listed = client.threads.get(thread_id)
    assert listed["values"]["messages"][0]["id"] == "h-1" and listed["title"]

    history = client.threads.get_history(thread_id, limit=100)
    assert history[0]["checkpoint"] == state["checkpoint"]
    assert len(history) > 2 and history[-1]["values"].get("messages", []) == []  # before the input
    older = client.threads.get_history(thread_id, limit=2, before=history[0]["checkpoint"]["checkpoint_id"])
    assert [h["checkpoint"] for h in older] == [h["checkpoint"] for h in history[1:3]]
    at = client.threads.get_state(thread_id, checkpoint_id=history[1]["checkpoint"]["checkpoint_id"])
    assert at["checkpoint"] == history[1]["checkpoint"]

    added = {"messages": [{"type": "ai", "content": "added"}]}
    written = client.threads.update_state(thread_id, added, as_node="model")
    assert written["checkpoint"]["checkpoint_id"] != state["checkpoint"]["checkpoint_id"]
    assert client.threads.get_state(thread_id)["values"]["messages"][-1]["content"] == "added"


# ---------------------------------------------------------------------------- runs


def _stream(client: Any, thread_id: str, text: str, modes: Any, **options: Any) -> list[Any]:
    return list(client.runs.stream(thread_id, "lead_agent", input=human(text), stream_mode=modes, **options))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("values", {"values"}),
        ("updates", {"updates"}),
        ("messages", {"messages/metadata", "messages/complete"}),
        ("messages-tuple", {"messages"}),
        ("custom", {"custom"}),
        ("debug", {"debug"}),
        ("tasks", {"tasks"}),
        ("checkpoints", {"checkpoints"}),
        ("events", {"events"}),
    ],
)
def test_stream_each_mode(client: Any, server: SdkServer, mode: str, expected: set[str]) -> None:
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    server.open_gate(gate)  # the gate extension still writes its custom events
    parts = _stream(client, thread_id, f"what is a deer gate:{gate}", mode)
    names = [p.event for p in parts]
    assert names[0] == "metadata" and names[-1] == "end", names
    assert set(names[1:-1]) == expected, names
    assert all(p.id for p in parts), "every event carries an id"
    ids = [int(p.id) for p in parts]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    if mode == "custom":
        assert [p.data for p in parts[1:-1]] == [{"gate": gate, "state": "waiting"}, {"gate": gate, "state": "open"}]
    if mode == "messages-tuple":
        message, metadata = parts[1].data
        assert message["type"] == "ai" and metadata["langgraph_node"]
    if mode == "values":
        assert parts[-2].data["messages"][-1]["type"] == "ai"


def test_stream_several_modes_and_a_tool_result(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    parts = _stream(client, thread_id, 'use calculator {"expression": "6 * 7"}', ["values", "updates"])
    names = {p.event for p in parts}
    assert {"values", "updates"} <= names and "messages" not in names
    tool = [p.data["tools"]["messages"][0] for p in parts if p.event == "updates" and "tools" in (p.data or {})]
    assert tool and tool[0]["type"] == "tool" and tool[0]["content"] == "42"
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["messages"][-1]["content"] == "Done. calculator returned: 42"


def test_stream_v2_parts(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "lead_agent", input=human("hi"), stream_mode=["values"], version="v2"))
    assert parts[0]["type"] == "metadata" and parts[-1]["type"] == "values"


def test_messages_in_langgraph_shapes_and_every_run_option(client: Any) -> None:
    """Content blocks, ``type`` and ``id``; every option LangGraph defines is accepted (the
    breakpoints pause the run: tests/platform_api/test_interrupts.py)."""
    thread_id = client.threads.create()["thread_id"]
    message = {"type": "human", "id": "m-blocks", "content": [{"type": "text", "text": "blocks work"}]}
    with pytest.warns(DeprecationWarning):  # checkpoint_during: the SDK's own deprecation
        parts = list(
            client.runs.stream(
                thread_id,
                "lead_agent",
                input={"messages": [message]},
                stream_mode=["values"],
                stream_subgraphs=True,
                stream_resumable=True,
                metadata={"from": "test"},
                config={"recursion_limit": 50, "tags": ["t"], "configurable": {"locale": "en"}},
                context={"user": "u"},
                checkpoint_during=True,
                feedback_keys=["score"],
                on_disconnect="continue",
                multitask_strategy="interrupt",
                if_not_exists="reject",
                after_seconds=0,
                langsmith_tracing={"project_name": "p"},
                durability="sync",
                strict_resume=False,
            )
        )
    assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["messages"][0]["id"] == "m-blocks"
    assert "blocks work" in values[-1]["messages"][-1]["content"]
    run = client.runs.get(thread_id, parts[0].data["run_id"])
    assert run["metadata"] == {"from": "test"} and run["kwargs"]["stream_mode"] == ["values"]


def test_every_option_the_sdk_can_send_is_a_known_field() -> None:
    """A new run option in the SDK fails here, by name, before a user meets a 422."""
    from langgraph_sdk._async.runs import RunsClient

    client_only = {"self", "thread_id", "headers", "params", "on_run_created", "version", "raise_error"}
    renamed = {"langsmith_tracing": "langsmith_tracer"}
    for method in (RunsClient.stream, RunsClient.create, RunsClient.wait):
        for name in inspect.signature(method).parameters:
            if name not in client_only:
                assert renamed.get(name, name) in RunCreate.model_fields, f"{method.__name__}({name}=...)"


def test_bad_input_is_one_clear_422(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    with pytest.raises(UnprocessableEntityError, match="stream_mode"):
        client.runs.create(thread_id, "lead_agent", input=human("x"), stream_mode="nonsense")
    with pytest.raises(UnprocessableEntityError, match="tool_call_id"):
        client.runs.create(thread_id, "lead_agent", input={"messages": [{"type": "tool", "content": "x"}]})
    with pytest.raises(NotFoundError, match="assistant"):
        client.runs.create(thread_id, "someone-else", input=human("x"))
    with pytest.raises(NotFoundError):
        client.runs.create("no-such-thread", "lead_agent", input=human("x"))
    made = client.runs.create(f"new-{SdkServer.gate()}", "lead_agent", input=human("x"), if_not_exists="create")
    assert client.runs.join(made["thread_id"], made["run_id"])["messages"][-1]["type"] == "ai"


def _first_seen(history: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
    """The oldest snapshot holding the message: where a chat UI says the message was born."""
    return next(h for h in reversed(history) if message_id in {m["id"] for m in h["values"].get("messages", [])})


def test_a_run_without_input_re_runs_from_a_checkpoint_as_a_ui_regenerates(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(thread_id, "lead_agent", input=human("hello there", id="h-1"))
    question, answer = first["messages"]
    # agent-chat-ui's "Refresh": no input, the checkpoint just before the answer was added.
    born = _first_seen(client.threads.get_history(thread_id, limit=1000), answer["id"])
    again = client.runs.wait(thread_id, "lead_agent", input=None, checkpoint=born["parent_checkpoint"])
    assert [m["type"] for m in again["messages"]] == ["human", "ai"]
    assert again["messages"][0] == question and again["messages"][1]["id"] != answer["id"]
    assert again["messages"][1]["content"] == answer["content"]  # the embedded model is deterministic
    assert client.threads.get_state(thread_id)["values"]["messages"] == again["messages"]
    assert [r["status"] for r in client.runs.list(thread_id)] == ["success", "success"]

    # Editing the question: new input on the checkpoint before the question was added.
    born = _first_seen(client.threads.get_history(thread_id, limit=1000), "h-1")
    edited = client.runs.wait(
        thread_id, "lead_agent", input=human("hello again"), checkpoint_id=born["parent_checkpoint"]["checkpoint_id"]
    )
    assert [m["content"] for m in edited["messages"]] == ["hello again", "Here is my answer to: hello again"]

    with pytest.raises(UnprocessableEntityError, match="'input' is required unless"):
        client.runs.create(thread_id, "lead_agent", input=None)


def test_wait_returns_the_final_values(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(thread_id, "lead_agent", input=human("one"))
    second = client.runs.wait(thread_id, "lead_agent", input=human("two"))
    assert len(second["messages"]) == len(first["messages"]) + 2
    assert second["messages"][-1]["type"] == "ai"
    # Answered from the run's own last values, they are the thread's state as stored.
    assert second == client.threads.get_state(thread_id)["values"]


def test_a_wait_run_streams_values_unless_told_otherwise(client: Any) -> None:
    """LangGraph Platform's default for a run that names no mode; the client of /wait reads
    only the final values, and a messages stream would cost every runnable a callback."""
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "lead_agent", input=human("one"))
    (run,) = client.runs.list(thread_id)
    assert {p.event for p in client.runs.join_stream(thread_id, run["run_id"])} == {"metadata", "values", "end"}
    client.http.post(
        f"/threads/{thread_id}/runs/wait", json={"input": human("two"), "stream_mode": ["values", "updates"]}
    )
    asked = next(r for r in client.runs.list(thread_id) if r["run_id"] != run["run_id"])
    events = {p.event for p in client.runs.join_stream(thread_id, asked["run_id"])}
    assert events == {"metadata", "values", "updates", "end"}


def test_create_then_join_list_and_get(client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "lead_agent", input=human("background"))
    assert run["status"] in ("pending", "running", "success") and run["assistant_id"] == "lead_agent"
    values = client.runs.join(thread_id, run["run_id"])
    assert values["messages"][-1]["type"] == "ai"
    record = client.runs.get(thread_id, run["run_id"])
    assert record["status"] == "success" and record["outcome"] == "completed"
    assert record["token_usage"]["total_tokens"] > 0 and record["answer"]
    listed = client.runs.list(thread_id)
    assert [r["run_id"] for r in listed] == [run["run_id"]]
    assert client.runs.list(thread_id, status="error") == []
    client.runs.delete(thread_id, run["run_id"])
    assert client.runs.list(thread_id) == []


def test_create_then_join_stream_from_the_start(client: Any, server: SdkServer) -> None:
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    modes = ["values", "custom"]
    run = client.runs.create(thread_id, "lead_agent", input=human(f"held gate:{gate}"), stream_mode=modes)
    threading.Timer(0.3, server.open_gate, (gate,)).start()
    parts = list(client.runs.join_stream(thread_id, run["run_id"]))
    names = [p.event for p in parts]
    assert names[0] == "metadata" and names[-1] == "end" and "custom" in names and "values" in names
    only_custom = list(client.runs.join_stream(thread_id, run["run_id"], stream_mode="custom"))
    assert {p.event for p in only_custom} == {"metadata", "custom", "end"}


def test_cancel_waits_and_interrupts(client: Any, server: SdkServer) -> None:
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    run = client.runs.create(thread_id, "lead_agent", input=human(f"never released gate:{gate}"))
    wait_for(lambda: run_status(client, thread_id, run["run_id"]) == "running")
    client.runs.cancel(thread_id, run["run_id"], wait=True)
    record = client.runs.get(thread_id, run["run_id"])
    assert (record["status"], record["outcome"]) == ("interrupted", "aborted")
    assert client.threads.get(thread_id)["status"] == "interrupted"
    client.runs.cancel(thread_id, run["run_id"])  # idempotent on a finished run


def test_cancel_with_rollback_restores_the_state(client: Any, server: SdkServer) -> None:
    thread_id = client.threads.create()["thread_id"]
    before = client.runs.wait(thread_id, "lead_agent", input=human("kept"))
    gate = server.gate()
    run = client.runs.create(thread_id, "lead_agent", input=human(f"rolled back gate:{gate}"))
    wait_for(lambda: run_status(client, thread_id, run["run_id"]) == "running")
    client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
    assert client.threads.get_state(thread_id)["values"]["messages"] == before["messages"]


def test_multitask_strategies(client: Any, server: SdkServer) -> None:
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    held = client.runs.create(thread_id, "lead_agent", input=human(f"first gate:{gate}"))
    wait_for(lambda: run_status(client, thread_id, held["run_id"]) == "running")
    with pytest.raises(ConflictError, match="reject"):
        client.runs.create(thread_id, "lead_agent", input=human("refused"), multitask_strategy="reject")
    queued = client.runs.create(thread_id, "lead_agent", input=human("queued"), multitask_strategy="enqueue")
    time.sleep(0.3)
    assert run_status(client, thread_id, held["run_id"]) == "running"  # enqueue interrupts nothing
    assert run_status(client, thread_id, queued["run_id"]) == "pending"
    server.open_gate(gate)
    client.runs.join(thread_id, queued["run_id"])
    assert run_status(client, thread_id, held["run_id"]) == "success"
    assert run_status(client, thread_id, queued["run_id"]) == "success"

    gate = server.gate()
    held = client.runs.create(thread_id, "lead_agent", input=human(f"again gate:{gate}"))
    wait_for(lambda: run_status(client, thread_id, held["run_id"]) == "running")
    follow = client.runs.create(thread_id, "lead_agent", input=human("newest wins"), multitask_strategy="interrupt")
    client.runs.join(thread_id, follow["run_id"])
    assert run_status(client, thread_id, held["run_id"]) == "interrupted"

    gate = server.gate()
    kept = client.threads.get_state(thread_id)["values"]["messages"]
    held = client.runs.create(thread_id, "lead_agent", input=human(f"undone gate:{gate}"))
    wait_for(lambda: run_status(client, thread_id, held["run_id"]) == "running")
    follow = client.runs.create(thread_id, "lead_agent", input=human("after rollback"), multitask_strategy="rollback")
    final = client.runs.join(thread_id, follow["run_id"])
    assert final["messages"][: len(kept)] == kept and len(final["messages"]) == len(kept) + 2
    assert "undone" not in str(final["messages"])


def test_dropping_a_stream_with_on_disconnect_cancel_cancels_the_run(client: Any, server: SdkServer) -> None:
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    stream = client.runs.stream(
        thread_id, "lead_agent", input=human(f"cancel me gate:{gate}"), stream_mode="custom", on_disconnect="cancel"
    )
    first = next(iter(stream))
    run_id = first.data["run_id"]
    stream.close()
    wait_for(lambda: run_status(client, thread_id, run_id) == "interrupted")


def test_dropping_a_wait_with_on_disconnect_cancel_cancels_the_run(client: Any, server: SdkServer) -> None:
    """The client leaving a ``/wait`` is noticed while the run still works, not at the next
    heartbeat's write (``gateway.streaming``): the run is cancelled, and the Gateway serves on."""
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    body = {"assistant_id": "lead_agent", "input": human(f"cancel my wait gate:{gate}"), "on_disconnect": "cancel"}
    with httpx.stream("POST", f"{server.url}/threads/{thread_id}/runs/wait", json=body, timeout=10) as response:
        assert response.status_code == 200
        (run,) = client.runs.list(thread_id)
        wait_for(lambda: run_status(client, thread_id, run["run_id"]) == "running")
    # the client has closed its connection, the run still waits at its gate
    wait_for(lambda: run_status(client, thread_id, run["run_id"]) == "interrupted")
    assert client.runs.wait(thread_id, "lead_agent", input=human("still serving"))["messages"][-1]["type"] == "ai"


# ---------------------------------------------------------------------------- resume


def _ids(parts: list[Any]) -> list[str]:
    return [p.id for p in parts]


def test_a_dropped_stream_resumed_with_last_event_id_gets_every_event_once(client: Any, server: SdkServer) -> None:
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    modes = ["values", "updates", "messages", "custom"]
    stream = client.runs.stream(thread_id, "lead_agent", input=human(f"resume me gate:{gate}"), stream_mode=modes)
    before: list[Any] = []
    for part in stream:
        before.append(part)
        if part.event == "custom":  # the run now waits at the gate: drop the connection mid-run
            break
    stream.close()
    run_id = before[0].data["run_id"]
    assert run_status(client, thread_id, run_id) == "running"
    server.open_gate(gate)
    after = list(client.runs.join_stream(thread_id, run_id, last_event_id=before[-1].id))

    whole = list(client.runs.join_stream(thread_id, run_id, last_event_id="-1"))
    assert _ids(before) + _ids(after) == _ids(whole)
    assert [(p.event, p.data) for p in before + after] == [(p.event, p.data) for p in whole]
    assert len(set(_ids(whole))) == len(whole)
    assert after and after[-1].event == "end" and "not_retained" not in {p.event for p in after}
    assert {"values", "updates", "messages/complete", "custom"} <= {p.event for p in after}


async def test_async_client_drop_and_resume(aclient: Any, server: SdkServer) -> None:
    thread = await aclient.threads.create()
    gate = server.gate()
    seen: list[Any] = []
    async for part in aclient.runs.stream(
        thread["thread_id"], "lead_agent", input=human(f"async gate:{gate}"), stream_mode=["values", "custom"]
    ):
        seen.append(part)
        if part.event == "custom":
            break
    server.open_gate(gate)
    run_id = seen[0].data["run_id"]
    rest = [p async for p in aclient.runs.join_stream(thread["thread_id"], run_id, last_event_id=seen[-1].id)]
    whole = [p async for p in aclient.runs.join_stream(thread["thread_id"], run_id)]
    assert _ids(seen) + _ids(rest) == _ids(whole) and rest[-1].event == "end"
    assert (await aclient.runs.get(thread["thread_id"], run_id))["status"] == "success"


async def test_async_client_threads_runs_and_history(aclient: Any) -> None:
    thread = await aclient.threads.create(metadata={"client": "async"})
    parts = [
        p async for p in aclient.runs.stream(thread["thread_id"], "lead_agent", input=human("hi"), stream_mode="values")
    ]
    assert parts[0].event == "metadata" and parts[-1].event == "end"
    run = await aclient.runs.create(thread["thread_id"], "lead_agent", input=human("again"))
    joined = await aclient.runs.join(thread["thread_id"], run["run_id"])
    assert len(joined["messages"]) == 4
    history = await aclient.threads.get_history(thread["thread_id"])
    assert history[0]["values"]["messages"] == joined["messages"]
    found = await aclient.threads.search(metadata={"client": "async"})
    assert thread["thread_id"] in {t["thread_id"] for t in found}
    assert [r["run_id"] for r in await aclient.runs.list(thread["thread_id"])][-1] == run["run_id"]
    await aclient.threads.delete(thread["thread_id"])
    with pytest.raises(NotFoundError):
        await aclient.threads.get(thread["thread_id"])


def test_info_ok_and_cors_preflight(server: SdkServer) -> None:
    root = server.url.removesuffix("/api")
    with httpx.Client() as http:
        info = http.get(f"{server.url}/info").json()
        assert info["version"] and info["flags"]["assistants"] is True
        assert http.get(f"{root}/ok").json() == {"ok": True}
        preflight = http.options(
            f"{server.url}/threads/search",
            headers={
                "Origin": "http://localhost:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-api-key,last-event-id",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
        created = http.post(f"{server.url}/threads", json={}, headers={"Origin": "http://127.0.0.1:5173"})
        assert created.headers["access-control-allow-origin"] == "http://127.0.0.1:5173"
        stranger = http.post(f"{server.url}/threads", json={}, headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in stranger.headers


def test_openapi_documents_streams_and_the_package_version(server: SdkServer) -> None:
    from deerflow_ext.gateway.routes.health import package_version

    root = server.url.removesuffix("/api")
    spec = httpx.get(f"{root}/openapi.json").json()
    assert spec["info"]["version"] == package_version("deerflow-ext")
    for path, method in (
        ("/api/threads/{thread_id}/runs/stream", "post"),
        ("/api/threads/{thread_id}/runs/{run_id}/stream", "get"),
    ):
        content = spec["paths"][path][method]["responses"]["200"]["content"]
        assert "text/event-stream" in content
        assert "messages/partial" in spec["paths"][path][method]["responses"]["200"]["description"]


def test_the_sdk_reconnects_by_itself_after_a_cut_connection(server: SdkServer) -> None:
    """The stream response's ``Location`` and event ids are all the SDK needs: a connection
    cut mid-run is resumed with ``Last-Event-ID`` and no event is lost or repeated."""
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    proxy = CuttingProxy(port)
    try:
        client = get_sync_client(url=f"http://127.0.0.1:{proxy.port}/api", api_key=None)
        thread_id = client.threads.create()["thread_id"]
        gate = server.gate()
        received: list[Any] = []
        for part in client.runs.stream(
            thread_id, "lead_agent", input=human(f"cut me gate:{gate}"), stream_mode=["values", "custom"]
        ):
            received.append(part)
            if part.event == "custom" and part.data["state"] == "waiting":
                proxy.cut()  # mid-run: the SDK sees a broken stream
                server.open_gate(gate)
        assert proxy.connections >= 2  # the first (pooled) connection, cut, and the reconnect
        run_id = received[0].data["run_id"]
        whole = list(get_sync_client(url=server.url, api_key=None).runs.join_stream(thread_id, run_id))
        assert _ids(received) == _ids(whole) and received[-1].event == "end"
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    """A Gateway that keeps 8 events per run, for a second after the run ends."""
    with sdk_server(
        tmp_path_factory.mktemp("sdk-tight"),
        sse_heartbeat_seconds=0.5,
        stream_retain_events=8,
        stream_retain_seconds=1.0,
    ) as running:
        yield running


def test_events_no_longer_retained_are_reported_never_skipped_silently(tight: SdkServer) -> None:
    client = get_sync_client(url=tight.url, api_key=None)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "lead_agent", input=human("many events"), stream_mode=["debug", "tasks"])
    client.runs.join(thread_id, run["run_id"])
    parts = list(client.runs.join_stream(thread_id, run["run_id"], last_event_id="2"))
    notice, *rest = parts
    assert notice.event == "not_retained" and notice.data["last_event_id"] == "2"
    assert notice.id == notice.data["resume_after"] and int(notice.id) > 2
    assert [int(p.id) for p in rest] == list(range(int(notice.id) + 1, int(notice.id) + 1 + len(rest)))
    assert 8 <= len(rest) <= 10 and rest[-1].event == "end"
    # resuming from the notice's id continues without another notice
    assert list(client.runs.join_stream(thread_id, run["run_id"], last_event_id=notice.id)) == rest


def test_an_expired_stream_says_so_and_ends_with_the_run_status(tight: SdkServer) -> None:
    client = get_sync_client(url=tight.url, api_key=None)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "lead_agent", input=human("short"))
    client.runs.join(thread_id, run["run_id"])
    time.sleep(1.5)  # past the retention after the end
    parts = list(client.runs.join_stream(thread_id, run["run_id"], last_event_id="3"))
    assert [p.event for p in parts] == ["not_retained", "end"]
    assert parts[1].data == {"run_id": run["run_id"], "status": "success", "outcome": "completed"}
    assert all(p.id for p in parts)


def test_a_quiet_stream_sends_heartbeats(server: SdkServer) -> None:
    client = get_sync_client(url=server.url, api_key=None)
    thread_id = client.threads.create()["thread_id"]
    gate = server.gate()
    run = client.runs.create(thread_id, "lead_agent", input=human(f"quiet gate:{gate}"))
    lines: list[str] = []
    with httpx.stream("GET", f"{server.url}/threads/{thread_id}/runs/{run['run_id']}/stream", timeout=30) as response:
        for line in response.iter_lines():
            lines.append(line)
            if lines.count(": heartbeat") == 2:
                server.open_gate(gate)
    assert lines.count(": heartbeat") >= 2 and "event: end" in lines


# ---------------------------------------------------------------------------- API token

API_TOKEN = "sdk-token-0123456789abcdef"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    """A Gateway started with DEERFLOW_API_TOKEN (here the setting it fills)."""
    with sdk_server(tmp_path_factory.mktemp("sdk-token"), api_token=API_TOKEN) as running:
        yield running


def test_the_sdk_api_key_or_a_bearer_header_opens_a_token_gateway(secured: SdkServer) -> None:
    from langgraph_sdk.errors import AuthenticationError

    keyed = get_sync_client(url=secured.url, api_key=API_TOKEN)  # sent as X-Api-Key
    thread_id = keyed.threads.create()["thread_id"]
    values = keyed.runs.wait(thread_id, "lead_agent", input=human("with a key"))
    assert values["messages"][-1]["type"] == "ai"
    parts = list(keyed.runs.stream(thread_id, "lead_agent", input=human("streamed"), stream_mode="values"))
    assert parts[0].event == "metadata" and "values" in {p.event for p in parts} and parts[-1].event == "end"

    bearer = get_sync_client(url=secured.url, api_key=None, headers={"Authorization": f"Bearer {API_TOKEN}"})
    assert [r["status"] for r in bearer.runs.list(thread_id)] == ["success", "success"]

    for stranger in (get_sync_client(url=secured.url, api_key=None), get_sync_client(url=secured.url, api_key="no")):
        with pytest.raises(AuthenticationError):
            stranger.threads.search()
    with httpx.Client() as http:  # liveness stays open for probes
        assert http.get(f"{secured.url}/ok").json() == {"ok": True}
