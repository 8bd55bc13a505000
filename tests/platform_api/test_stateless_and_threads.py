"""Stateless runs, thread copy and count (crons: ``test_crons``)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError
from platform_support import Platform, human

pytestmark = pytest.mark.e2e


def test_a_stateless_wait_answers_and_its_thread_is_gone(client: Any) -> None:
    before = client.threads.count()
    values = client.runs.wait(None, "lead_agent", input=human("hello"))
    assert values["messages"][-1]["type"] == "ai"
    _eventually(lambda: client.threads.count() == before)


def test_a_stateless_stream_with_keep_leaves_a_thread_holding_the_answer(client: Any, platform: Platform) -> None:
    before = client.threads.count()
    parts = list(
        client.runs.stream(None, "lead_agent", input=human("hello"), stream_mode="values", on_completion="keep")
    )
    assert any(p.event == "values" for p in parts)
    _eventually(lambda: client.threads.count() == before + 1)
    if platform.is_peer:
        return  # LangGraph's metadata event names the run alone
    state = client.threads.get_state(parts[0].data["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]


async def test_a_stateless_background_run_through_the_async_client(aclient: Any) -> None:
    run = await aclient.runs.create(None, "lead_agent", input=human("hello"), on_completion="keep")
    await aclient.runs.join(run["thread_id"], run["run_id"])
    assert (await aclient.runs.get(run["thread_id"], run["run_id"]))["status"] == "success"


def test_a_stateless_run_for_an_unknown_assistant_leaves_no_thread(client: Any, platform: Platform) -> None:
    before = client.threads.count()
    answer = httpx.post(f"{platform.url}/runs/wait", json={"assistant_id": "nobody", "input": human("hi")})
    assert answer.status_code == (422 if platform.is_peer else 404)
    assert client.threads.count() == before


def test_a_copied_thread_has_the_state_and_history_under_a_new_id(client: Any) -> None:
    thread = client.threads.create(metadata={"owner": "ada"})["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("one"))
    client.runs.wait(thread, "lead_agent", input=human("two"))
    copy = client.threads.copy(thread)
    assert copy["thread_id"] != thread and copy["metadata"]["owner"] == "ada"
    assert client.threads.get_state(copy["thread_id"])["values"] == client.threads.get_state(thread)["values"]
    original = client.threads.get_history(thread, limit=100)
    copied = client.threads.get_history(copy["thread_id"], limit=100)
    assert [h["checkpoint"]["checkpoint_id"] for h in copied] == [h["checkpoint"]["checkpoint_id"] for h in original]
    # The copy goes on by itself: the original does not see its next run.
    client.runs.wait(copy["thread_id"], "lead_agent", input=human("three"))
    assert len(client.threads.get_state(thread)["values"]["messages"]) == 4
    assert len(client.threads.get_state(copy["thread_id"])["values"]["messages"]) == 6


def test_copying_an_unknown_thread_is_a_404(client: Any, platform: Platform) -> None:
    # LangGraph's server answers 409 here; an unknown thread is a 404 everywhere else.
    with pytest.raises(ConflictError if platform.is_peer else NotFoundError):
        client.threads.copy(str(uuid.uuid4()))


def test_threads_count_filters_by_metadata_and_status(client: Any) -> None:
    tag = {"suite": "count-" + client.threads.create()["thread_id"]}
    for _ in range(3):
        client.threads.create(metadata=tag)
    assert client.threads.count(metadata=tag) == 3
    assert client.threads.count(metadata=tag, status="idle") == 3
    assert client.threads.count(metadata=tag, status="busy") == 0


def _eventually(check: Any, seconds: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "did not happen in time"
        time.sleep(0.05)


def test_the_events_stream_mode_sends_langchain_callback_events(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread, "lead_agent", input=human("hello"), stream_mode=["events", "values"]))
    kinds = [p.data["event"] for p in parts if p.event == "events"]
    assert "on_chain_start" in kinds and "on_chat_model_start" in kinds and "on_chain_end" in kinds
    assert all({"run_id", "name", "data"} <= set(p.data) for p in parts if p.event == "events")
    values = [p.data for p in parts if p.event == "values"]
    assert values and values[-1]["messages"][-1]["type"] == "ai"
    assert client.threads.get(thread)["status"] == "idle"


def test_thread_search_filters_metadata_in_the_database_by_containment(client: Any, platform: Platform) -> None:
    tag = "search-" + str(uuid.uuid4())
    client.threads.create(metadata={"tag": tag, "n": 1, "on": True, "who": {"name": "ada", "team": "x"}})
    client.threads.create(metadata={"tag": tag, "n": 2, "on": False, "who": {"name": "bob"}})
    client.threads.create(metadata={"tag": tag, "n": "1", "on": None})
    assert client.threads.count(metadata={"tag": tag}) == 3
    assert client.threads.count(metadata={"tag": tag, "n": 1}) == 1  # the number, not the text "1"
    assert client.threads.count(metadata={"tag": tag, "on": False}) == 1
    assert client.threads.count(metadata={"tag": tag, "on": None}) == 1
    assert [t["metadata"]["n"] for t in client.threads.search(metadata={"tag": tag, "who": {"name": "ada"}})] == [1]
    page = client.threads.search(metadata={"tag": tag}, limit=2, offset=1, sort_by="created_at", sort_order="asc")
    assert [t["metadata"]["n"] for t in page] == [2, "1"]
    if not platform.is_peer:
        answer = httpx.post(f"{platform.url}/threads/search", json={"metadata": {'a"b': 1}})
        assert answer.status_code == 422 and "metadata" in answer.text


def test_thread_search_filters_state_values_in_the_database(client: Any, platform: Platform) -> None:
    tag = {"suite": "values-" + str(uuid.uuid4())}
    ran, updated, other = (client.threads.create(metadata=tag)["thread_id"] for _ in range(3))
    # Each thread the filters meet has a state: LangGraph's in-memory server fails (500) a
    # values filter that meets a thread with none.
    for thread, text in ((ran, "hello"), (updated, "good morning"), (other, "good night")):
        client.runs.wait(thread, "lead_agent", input=human(text))
    title = client.threads.get_state(ran)["values"]["title"]
    assert [t["thread_id"] for t in client.threads.search(metadata=tag, values={"title": title})] == [ran]
    assert client.threads.count(metadata=tag, values={"title": title}) == 1
    assert client.threads.count(metadata=tag, values={"title": title + " no"}) == 0
    # A state update is searchable at once; so is a copy of the thread.
    client.threads.update_state(updated, {"title": "set by hand"})
    assert [t["thread_id"] for t in client.threads.search(metadata=tag, values={"title": "set by hand"})] == [updated]
    copy = client.threads.copy(ran)["thread_id"]
    found = client.threads.search(metadata=tag, values={"title": title})
    assert sorted(t["thread_id"] for t in found) == sorted([ran, copy])
    if not platform.is_peer:
        answer = httpx.post(f"{platform.url}/threads/search", json={"values": {"messages": []}})
        assert answer.status_code == 422 and "'messages' is not searchable" in answer.text
