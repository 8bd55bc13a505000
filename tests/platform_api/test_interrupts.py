"""Human in the loop through the official client: a run pauses, the thread says so, a
``command`` resumes it — for breakpoints (``interrupt_before``) and for ``interrupt()`` raised
by a middleware an extension contributes (LangChain's ``HumanInTheLoopMiddleware``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError
from platform_support import COMPAT_URL, Platform, human

from gateway.sdk_server import sdk_server
from pg_support import PG_UNREACHABLE, fresh_database

pytestmark = pytest.mark.e2e

HITL = [{"name": "hitl", "use": "platform_api.hitl_ext:install"}]
APPROVE = {"decisions": [{"type": "approve"}]}
REJECT = {"decisions": [{"type": "reject", "message": "not now"}]}


def _kinds() -> list[Any]:
    return ["peer"] if COMPAT_URL else ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=_kinds())
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def served(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Our Gateway with the HITL extension, or the peer, whose graph gates ``task`` itself."""
    if kind == "peer":
        assert COMPAT_URL is not None
        yield Platform("peer", COMPAT_URL.rstrip("/"))
        return
    directory = tmp_path_factory.mktemp(f"hitl-{kind}")
    with _database(kind, directory) as database, sdk_server(directory, database_url=database, plugins=HITL) as server:
        yield server


@pytest.fixture
def client(served: Any) -> Any:
    return get_sync_client(url=served.url, api_key=None)


def _paused_run_status(served: Any) -> str:
    """A divergence on purpose: LangGraph's server ends a run that paused ``success`` (only the
    thread says ``interrupted``); ours ends it ``interrupted``, outcome ``aborted``, so a run
    list and the extensions' ``on_task_stop`` tell a pause from a completion."""
    return "success" if getattr(served, "is_peer", False) else "interrupted"


def _tool_messages(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in values.get("messages", []) if m.get("type") == "tool"]


def test_a_gated_tool_call_pauses_the_run_and_the_thread_shows_the_interrupt(client: Any, served: Any) -> None:
    thread = client.threads.create()["thread_id"]
    values = client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    interrupts = values["__interrupt__"]
    assert len(interrupts) == 1 and interrupts[0]["id"]
    assert interrupts[0]["value"]["action_requests"][0]["name"] == "task"
    assert _tool_messages(values) == []  # the tool did not run

    got = client.threads.get(thread)
    assert got["status"] == "interrupted"
    assert [i["id"] for pending in got["interrupts"].values() for i in pending] == [interrupts[0]["id"]]
    state = client.threads.get_state(thread)
    assert state["next"] and state["interrupts"][0]["id"] == interrupts[0]["id"]
    run = client.runs.list(thread)[0]
    assert run["status"] == _paused_run_status(served)
    if not getattr(served, "is_peer", False):
        assert run["outcome"] == "aborted" and run["error"] is None


def test_approving_resumes_the_run_and_the_tool_runs(client: Any, served: Any) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    values = client.runs.wait(thread, "lead_agent", command={"resume": APPROVE})
    assert "__interrupt__" not in values
    assert len(_tool_messages(values)) == 1 and _tool_messages(values)[0].get("status") != "error"
    assert values["messages"][-1]["type"] == "ai"
    assert client.threads.get(thread)["status"] == "idle"
    assert sorted(r["status"] for r in client.runs.list(thread)) == sorted([_paused_run_status(served), "success"])


def test_rejecting_resumes_the_run_without_the_tool(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    values = client.runs.wait(thread, "lead_agent", command={"resume": REJECT})
    tool = _tool_messages(values)
    assert len(tool) == 1 and tool[0]["status"] == "error" and "not now" in str(tool[0]["content"])
    assert client.threads.get(thread)["status"] == "idle"


def test_the_interrupt_is_streamed_in_values_and_updates_as_langgraph_sends_it(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread, "lead_agent", input=human("delegate: count the stars"), stream_mode=["values", "updates"]
        )
    )
    updates = [p.data for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    values = [p.data for p in parts if p.event == "values" and "__interrupt__" in p.data]
    assert len(updates) == 1 and len(values) == 1
    assert updates[0]["__interrupt__"][0]["id"] == values[0]["__interrupt__"][0]["id"]
    assert parts[-1].event != "error"


async def test_the_async_client_resumes_a_paused_thread(served: Any) -> None:
    aclient = get_client(url=served.url, api_key=None)
    thread = (await aclient.threads.create())["thread_id"]
    await aclient.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    assert (await aclient.threads.get(thread))["status"] == "interrupted"
    parts = [p async for p in aclient.runs.stream(thread, "lead_agent", command={"resume": APPROVE})]
    assert parts[0].event == "metadata" and not any(p.event == "error" for p in parts)
    assert (await aclient.threads.get(thread))["status"] == "idle"


def test_a_breakpoint_stops_before_the_tools_node_and_a_resume_goes_on(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    # "hello" needs no tool: the model answers; a breakpoint on a node never reached is no pause.
    client.runs.wait(thread, "lead_agent", input=human("hello"), interrupt_before=["tools"])
    assert client.threads.get(thread)["status"] == "idle"

    client.runs.wait(thread, "lead_agent", input=human("delegate: a"), interrupt_after=["model"])
    state = client.threads.get_state(thread)
    assert client.threads.get(thread)["status"] == "interrupted" and state["next"]


def test_resuming_a_thread_that_is_not_interrupted_is_a_409_with_one_line(served: Any, client: Any) -> None:
    if getattr(served, "is_peer", False):
        pytest.skip("a divergence on purpose: LangGraph's server runs a resume of a thread with nothing pending")
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("hello"))
    answer = httpx.post(
        f"{served.url}/threads/{thread}/runs/wait", json={"assistant_id": "lead_agent", "command": {"resume": 1}}
    )
    assert answer.status_code == 409
    assert answer.json()["detail"] == f"thread {thread} is not interrupted (status idle); there is nothing to resume"


def test_resuming_a_thread_that_does_not_exist_is_a_404_even_with_create(served: Any, client: Any) -> None:
    if getattr(served, "is_peer", False):
        pytest.skip("a divergence on purpose: LangGraph's server creates the thread and runs the resume on nothing")
    thread = str(uuid.uuid4())
    for path in ("wait", "stream", ""):
        answer = httpx.post(
            f"{served.url}/threads/{thread}/runs/{path}".rstrip("/"),
            json={"assistant_id": "lead_agent", "command": {"resume": APPROVE}, "if_not_exists": "create"},
        )
        assert answer.status_code == 404, (path, answer.text)
        assert "nothing to resume" in answer.json()["detail"]
    with pytest.raises(NotFoundError):
        client.threads.get(thread)  # not created


def test_a_copy_of_an_interrupted_thread_keeps_its_status_and_interrupts(client: Any, served: Any) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    original = client.threads.get(thread)
    copy = client.threads.copy(thread)
    ids = [i["id"] for pending in original["interrupts"].values() for i in pending]
    assert ids and [i["id"] for i in client.threads.get_state(copy["thread_id"])["interrupts"]] == ids
    interrupted = {t["thread_id"] for t in client.threads.search(status="interrupted", limit=1000)}
    if getattr(served, "is_peer", False):
        # A divergence: ours makes the copy of an interrupted thread `interrupted`, with its
        # interrupts, as its state is; LangGraph's server makes it `idle`, with no interrupts
        # but in its state (a resume of it runs all the same).
        assert (copy["status"], copy.get("interrupts")) == ("idle", None)
        assert copy["thread_id"] not in interrupted
    else:
        assert copy["status"] == "interrupted"
        assert [i["id"] for pending in copy["interrupts"].values() for i in pending] == ids
        assert copy["thread_id"] in interrupted
    values = client.runs.wait(copy["thread_id"], "lead_agent", command={"resume": APPROVE})
    assert len(_tool_messages(values)) == 1
    assert client.threads.get(copy["thread_id"])["status"] == "idle"
    assert client.threads.get(thread)["status"] == "interrupted"


def test_an_empty_or_misspelt_command_is_refused(served: Any) -> None:
    thread = get_sync_client(url=served.url, api_key=None).threads.create()["thread_id"]
    for body in ({"command": {}}, {"command": {"resum": 1}}):
        answer = httpx.post(f"{served.url}/threads/{thread}/runs/wait", json={"assistant_id": "lead_agent", **body})
        if getattr(served, "is_peer", False):
            # A divergence: ours refuses an empty or unknown command with a 422 naming it;
            # LangGraph's server takes it and the run fails (an error in a 200 answer).
            assert answer.status_code == 200 and "__error__" in answer.json(), body
        else:
            assert answer.status_code == 422 and "command" in answer.json()["detail"], body


def test_a_resume_sent_with_an_empty_input_as_agent_chat_ui_sends_it(client: Any, served: Any) -> None:
    """agent-chat-ui's inbox submits ``input: {}`` next to the command: the command wins."""
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    body = {"assistant_id": "lead_agent", "input": {}, "command": {"resume": APPROVE}}
    answer = httpx.post(f"{served.url}/threads/{thread}/runs/wait", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert len(_tool_messages(answer.json())) == 1
    assert client.threads.get(thread)["status"] == "idle"


@contextmanager
def _database(kind: str, directory: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{directory / 'deerflow.db'}"
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


def test_an_interrupt_survives_a_gateway_restart(kind: str, tmp_path: Path) -> None:
    if kind == "peer":
        pytest.skip("restarts our Gateway")
    with _database(kind, tmp_path) as database:
        with sdk_server(tmp_path / "first", database_url=database, plugins=HITL) as first:
            client = get_sync_client(url=first.url, api_key=None)
            thread = client.threads.create()["thread_id"]
            client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
        # The first Gateway is gone: a new one on the same database resumes the thread.
        with sdk_server(tmp_path / "second", database_url=database, plugins=HITL) as second:
            client = get_sync_client(url=second.url, api_key=None)
            assert client.threads.get(thread)["status"] == "interrupted"
            values = client.runs.wait(thread, "lead_agent", command={"resume": APPROVE})
            assert len(_tool_messages(values)) == 1
            assert client.threads.get(thread)["status"] == "idle"


def test_a_tool_call_that_pauses_passes_through_observers_and_isolation_untouched(tmp_path: Path) -> None:
    """``interrupt()`` inside a wrapped tool call is control flow for every layer around it:
    the observing extension outside it sees no call until the human answers, the tool runs
    once (after "yes"), and a broken extension beside them still fails open."""
    log = tmp_path / "tools.jsonl"
    plugins = [
        {"name": "observe", "use": "platform_api.tool_interrupt_ext:observe", "config": {"log": str(log)}},
        {"name": "ask", "use": "platform_api.tool_interrupt_ext:ask"},
        {"name": "broken", "use": "platform_api.tool_interrupt_ext:broken"},
    ]
    with sdk_server(tmp_path, plugins=plugins) as served:
        client = get_sync_client(url=served.url, api_key=None)
        thread = client.threads.create()["thread_id"]
        paused = client.runs.wait(thread, "lead_agent", input=human('use calculator {"expression": "6*7"}'))
        assert paused["__interrupt__"][0]["value"] == {"question": "run calculator?"}
        assert not log.exists()  # the observer saw no tool call: none ran
        assert client.threads.get(thread)["status"] == "interrupted"

        done = client.runs.wait(thread, "lead_agent", command={"resume": "yes"})
        tool = _tool_messages(done)
        assert len(tool) == 1 and tool[0]["content"] == "42"
        assert [json.loads(line) for line in log.read_text().splitlines()] == [
            {"tool": "calculator", "status": "success"}
        ]
        assert client.threads.get(thread)["status"] == "idle"


def test_a_resume_follows_the_multitask_strategy_like_any_run(client: Any, served: Any) -> None:
    if getattr(served, "is_peer", False):
        pytest.skip("holds a run at our gate extension")
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"))
    gate = served.gate()
    held = client.runs.create(thread, "lead_agent", input=human(f"hello gate:{gate}"))
    try:
        with pytest.raises(ConflictError):
            client.runs.create(thread, "lead_agent", command={"resume": APPROVE}, multitask_strategy="reject")
    finally:
        served.open_gate(gate)
    client.runs.join(thread, held["run_id"])
    assert client.runs.get(thread, held["run_id"])["status"] == "success"
