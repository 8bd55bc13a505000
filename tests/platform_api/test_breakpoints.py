"""A thread paused at a breakpoint, through the official client (issue 54, rows 12, 14, 15).

``runs.wait(thread, assistant, input=None)`` sends no ``input``: on a thread paused by
``interrupt_before`` LangGraph's server goes on from the checkpoint, and so does ours; a copy
of the paused thread is paused too; a ``command.goto`` naming no node of the graph is a 422.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import UnprocessableEntityError
from platform_support import Platform, human

pytestmark = pytest.mark.e2e


def _paused_before_tools(client: Any) -> str:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("delegate: count the stars"), interrupt_before=["tools"])
    assert client.threads.get_state(thread)["next"] == ["tools"]
    assert client.threads.get(thread)["status"] == "interrupted"
    return thread


def _skip_on_peer(platform: Platform) -> None:
    if platform.is_peer:  # its graph gates `task` (HITL) before the tools node: no breakpoint there
        pytest.skip("the peer's graph pauses at its HITL node before `tools`; test_interrupts covers it")


def test_a_run_without_input_continues_a_thread_paused_before_tools(client: Any, platform: Platform) -> None:
    _skip_on_peer(platform)
    thread = _paused_before_tools(client)
    values = client.runs.wait(thread, "lead_agent", input=None)
    assert [m["type"] for m in values["messages"]][-2:] == ["tool", "ai"]  # the tool ran, the model answered
    assert client.threads.get(thread)["status"] == "idle"
    assert client.threads.get_state(thread)["next"] == []
    # Nothing pending any more: a run without input has nothing to go on from (LangGraph's
    # server runs it as a no-op there; ours says what is missing, README).
    with pytest.raises(httpx.HTTPStatusError, match="422") as refused:
        client.runs.wait(thread, "lead_agent", input=None)
    assert "'input' is required unless" in refused.value.response.text
    with pytest.raises(UnprocessableEntityError, match="nothing pending to continue"):
        client.runs.create(thread, "lead_agent", input=None)


def test_a_copy_of_a_paused_thread_is_paused_and_goes_on(client: Any, platform: Platform) -> None:
    _skip_on_peer(platform)
    thread = _paused_before_tools(client)
    copy = client.threads.copy(thread)
    assert copy["status"] == "interrupted"
    assert client.threads.get(copy["thread_id"])["status"] == "interrupted"
    inbox = {t["thread_id"] for t in client.threads.search(status="interrupted", limit=1000)}
    assert {thread, copy["thread_id"]} <= inbox
    values = client.runs.wait(copy["thread_id"], "lead_agent", input=None)
    assert values["messages"][-1]["type"] == "ai"
    assert client.threads.get(thread)["status"] == "interrupted"  # the original waits still


def test_goto_a_node_the_graph_does_not_have_is_a_422_naming_it(client: Any, platform: Platform) -> None:
    if platform.is_peer:
        pytest.skip("a divergence on purpose: LangGraph's server accepts a goto to an unknown node (README)")
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input=human("hello"))
    for goto in ("no_such_node", ["model", "nor_this"], {"node": "nope", "arg": {}}):
        answer = httpx.post(
            f"{platform.url}/threads/{thread}/runs/wait", json={"assistant_id": "lead_agent", "command": {"goto": goto}}
        )
        assert answer.status_code == 422, (goto, answer.text)
        assert "command.goto: no node" in answer.json()["detail"] and "model" in answer.json()["detail"]
    assert len(client.runs.list(thread)) == 1
