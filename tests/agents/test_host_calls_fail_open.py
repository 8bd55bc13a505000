"""The host's own model calls (title, summarization, goal, memory) never fail the user's run.

A real ``ChatOpenAI`` talks to the loopback provider (``fake_openai.FakeOpenAI``), which
answers the agent and fails only the host's request under test: by dropping the connection
(a provider that stops right after the answer) or with a 500. The run keeps its answer and
its outcome, and the failure is one warning line naming the call and the model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from deerflow_ext.agents.prompts import GOAL_MARKER, MEMORY_MARKER, SUMMARY_MARKER, TITLE_MARKER
from deerflow_ext.client import DeerFlowClient
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from fake_openai import DROP, FakeOpenAI

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ANSWER = "the visible answer is here"


def _asks(marker: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda messages: any(marker in str(m.get("content")) for m in messages)


def _fails(marker: str, status: int = DROP) -> Callable[[list[dict[str, Any]]], int | None]:
    asks = _asks(marker)
    return lambda messages: status if asks(messages) else None


def _reply(messages: list[dict[str, Any]]) -> str:
    if _asks(GOAL_MARKER)(messages):
        return '{"met": true, "reason": "done"}'
    if _asks(MEMORY_MARKER)(messages):
        return '["the user says hello"]'
    return "A title" if _asks(TITLE_MARKER)(messages) else ANSWER


def _model(fake: FakeOpenAI, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "use": "langchain_openai:ChatOpenAI",
        "model": f"{name}-model",
        "api_key": "k",
        "base_url": fake.base_url,
        **extra,
    }


def _client(fake: FakeOpenAI, *models: dict[str, Any], **sections: Any) -> DeerFlowClient:
    data = {"models": list(models), "retry": {"backoff_seconds": 0}, "memory": {"enabled": False}, **sections}
    return DeerFlowClient(AppConfig.model_validate(data), extensions=LoadedExtensions.empty())


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("status", [DROP, 500], ids=["connection-dropped", "http-500"])
async def test_a_failing_title_call_leaves_the_answer_and_one_line_naming_the_title_model(
    caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.INFO)
    with FakeOpenAI(reply=_reply, fail_when=_fails(TITLE_MARKER, status)) as fake:
        client = _client(fake, _model(fake, "big"), _model(fake, "cheap", purposes=["title"]))
        result = await client.arun("hello", "t-1")
        titled = [b for b in fake.completions() if _asks(TITLE_MARKER)(b["messages"])]
    assert result.answer == ANSWER
    assert result.title is None
    assert len(titled) == 1, "the title request was made (and failed) once"
    (line,) = _warnings(caplog)
    assert line.startswith("the host's title call on model cheap-model failed (")
    assert line.endswith("the run keeps its answer, the thread no title yet")


async def test_the_next_exchange_titles_the_thread_the_failed_call_left_untitled() -> None:
    failures = iter([DROP])
    with FakeOpenAI(reply=_reply, fail_when=lambda m: next(failures, None) if _asks(TITLE_MARKER)(m) else None) as fake:
        client = _client(fake, _model(fake, "gpt"))
        assert (await client.arun("hello", "t-1")).title is None
        assert (await client.arun("again", "t-1")).title == "A title"


async def test_a_title_call_past_its_bound_is_given_up_and_the_run_returns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    stall = lambda messages: 30.0 if _asks(TITLE_MARKER)(messages) else 0.0  # noqa: E731
    with FakeOpenAI(reply=_reply, stall_when=stall) as fake:
        client = _client(fake, _model(fake, "gpt"), title={"timeout_seconds": 1})
        started = time.monotonic()
        result = await client.arun("hello", "t-1")
        took = time.monotonic() - started
    assert result.answer == ANSWER and result.title is None
    assert took < 20, f"the run waited {took:.1f} s for a title bounded at 1 s"
    (line,) = _warnings(caplog)
    assert "title call on model gpt-model failed (TimeoutError: no reply within 1 s)" in line


async def test_a_failing_summary_call_compacts_nothing_and_the_run_answers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with FakeOpenAI(reply=_reply, fail_when=_fails(SUMMARY_MARKER, 500)) as fake:
        client = _client(fake, _model(fake, "gpt"), summarization={"trigger_messages": 4, "keep_messages": 1})
        await client.arun("hello", "t-1")
        await client.arun("again", "t-1")
        result = await client.arun("third", "t-1")  # past 4 messages: a summary is asked for, and fails
        asked = [b for b in fake.completions() if _asks(SUMMARY_MARKER)(b["messages"])]
    assert asked, "the summary was asked for"
    assert result.answer == ANSWER
    assert len(result.values["messages"]) == 6, "nothing was compacted"
    lines = [w for w in _warnings(caplog) if "summarization call" in w]
    assert lines and all(w.startswith("the host's summarization call on model gpt-model failed (") for w in lines)
    assert len(lines) == len(asked), "one line per failed summary call"


async def test_a_failing_goal_verdict_keeps_the_answer_unjudged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with FakeOpenAI(reply=_reply, fail_when=_fails(GOAL_MARKER)) as fake:
        client = _client(fake, _model(fake, "gpt"), _model(fake, "judge", purposes=["goal"]))
        result = await client.arun("hello", "t-1", goal="say hello")
    assert result.answer == ANSWER
    assert (result.goal_met, result.continuations) == (None, 0)
    (line,) = _warnings(caplog)
    assert line.startswith("the host's goal call on model judge-model failed (")


async def test_a_failing_memory_call_is_one_line_naming_the_model(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with FakeOpenAI(reply=_reply, fail_when=_fails(MEMORY_MARKER, 500)) as fake:
        client = _client(fake, _model(fake, "gpt"), memory={"enabled": True, "debounce_seconds": 0})
        result = await client.arun("hello", "t-1")
        await client.aclose()  # flushes the extraction
    assert result.answer == ANSWER and result.title == "A title"
    (line,) = _warnings(caplog)
    assert line.startswith("the host's memory call on model gpt-model failed (") and "Error code: 500" in line
    assert line.endswith("thread t-1 remembers nothing new")
