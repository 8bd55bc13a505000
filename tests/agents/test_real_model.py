"""Real models through ``langchain-openai``'s ``ChatOpenAI`` against a fake OpenAI server.

Nothing is mocked between the host and the socket: the real provider package, the real
``openai`` SDK and httpx talk to :class:`fake_openai.FakeOpenAI` on loopback, streaming and
not. What is checked: system calls (title, summarization) never reach the client's
``messages`` stream, per-purpose models put the host's own calls on another model, and a
failing provider call is attempted ``1 + retry.max_retries`` times with one log line each.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from deerflow_ext.agents.prompts import SUMMARY_MARKER, TITLE_MARKER
from deerflow_ext.client import DeerFlowClient
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from fake_openai import FakeOpenAI

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _reply(messages: list[dict[str, Any]]) -> str:
    """Answers the host's prompts recognisably, anything else with a fixed sentence."""
    text = " ".join(str(m.get("content")) for m in messages)
    if TITLE_MARKER in text:
        return "SECRET-TITLE words"
    if SUMMARY_MARKER in text:
        return "SECRET-SUMMARY of it"
    return "the visible answer is here"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(reply=_reply, api_key="test-key") as server:
        yield server


def _model(fake: FakeOpenAI, name: str = "gpt", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "use": "langchain_openai:ChatOpenAI",
        "model": f"{name}-model",
        "api_key": "test-key",
        "base_url": fake.base_url,
        **extra,
    }


def _config(*models: dict[str, Any], **sections: Any) -> AppConfig:
    return AppConfig.model_validate(
        {"models": list(models), "memory": {"enabled": False}, "retry": {"backoff_seconds": 0}, **sections}
    )


def _streamed_text(events: list[tuple[str, Any]]) -> str:
    """What the model *said* on the ``messages`` stream (its AI messages and token chunks).

    A summary also enters state as a human message (the compaction itself), which the
    stream shows as state; the model call that wrote it must not be streamed as the
    assistant speaking.
    """
    parts: list[str] = []
    for event, data in events:
        if event == "messages":
            message: BaseMessage = data[0]
            if isinstance(message, AIMessage):
                parts.append(str(message.content))
    return "".join(parts)


async def _events(client: DeerFlowClient, prompt: str, thread_id: str = "t-1") -> list[tuple[str, Any]]:
    return [event async for event in client.astream(prompt, thread_id)]


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "not-streaming"])
async def test_system_calls_never_reach_the_messages_stream(fake: FakeOpenAI, streaming: bool) -> None:
    client = DeerFlowClient(
        _config(_model(fake, streaming=streaming), summarization={"trigger_messages": 4, "keep_messages": 1}),
        extensions=LoadedExtensions.empty(),
    )
    await _events(client, "hello")  # first exchange: the title call
    events = await _events(client, "and again")  # the thread passes 4 messages: summarization
    events = [*events, *await _events(client, "third")]
    bodies = [" ".join(str(m.get("content")) for m in body["messages"]) for body in fake.completions()]
    assert any(TITLE_MARKER in body for body in bodies) and any(SUMMARY_MARKER in body for body in bodies)
    streamed = _streamed_text(events)
    assert "the visible answer is here" in streamed
    assert "SECRET" not in streamed
    if streaming:
        chunks = [data[0] for event, data in events if event == "messages"]
        assert any(isinstance(c, AIMessageChunk) for c in chunks), "tokens were streamed one by one"
        assert all(body.get("stream") for body in fake.completions())


async def test_system_calls_on_the_embedded_model_stay_out_of_the_stream() -> None:
    client = DeerFlowClient(
        AppConfig.model_validate(
            {"memory": {"enabled": False}, "summarization": {"trigger_messages": 4, "keep_messages": 1}}
        ),
        extensions=LoadedExtensions.empty(),
    )
    events = [*await _events(client, "hello"), *await _events(client, "again"), *await _events(client, "more")]
    streamed = _streamed_text(events)
    assert "Here is my answer to: hello" in streamed
    assert "earlier message(s)" not in streamed  # the embedded summary
    result = events[-1][1]
    assert result.title == "Hello"
    assert "Hello" not in streamed.replace("Here is my answer to: hello", "")


async def test_purposes_put_the_hosts_calls_on_their_own_model(fake: FakeOpenAI) -> None:
    client = DeerFlowClient(
        _config(_model(fake, "big"), _model(fake, "cheap", purposes=["title", "memory", "summarization", "goal"])),
        extensions=LoadedExtensions.empty(),
    )
    result = await client.arun("hello")
    by_model = {body["model"]: " ".join(str(m.get("content")) for m in body["messages"]) for body in fake.completions()}
    assert set(by_model) == {"big-model", "cheap-model"}
    assert TITLE_MARKER in by_model["cheap-model"] and TITLE_MARKER not in by_model["big-model"]
    assert result.answer == "the visible answer is here" and result.title == "SECRET-TITLE words"


async def test_a_failing_provider_call_is_attempted_once_per_retry_with_one_line_each(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_next(10, status=500, message="upstream exploded")
    client = DeerFlowClient(_config(_model(fake)), extensions=LoadedExtensions.empty())
    caplog.set_level(logging.INFO)
    with pytest.raises(Exception, match="upstream exploded"):
        await client.arun("hello")
    assert len(fake.completions()) == 3  # 1 + retry.max_retries (2); the SDK's own retries are off
    failures = [r for r in caplog.records if "model call failed" in r.getMessage()]
    assert [r.getMessage().split(":")[0] for r in failures] == [
        "model call failed (attempt 1 of 3)",
        "model call failed (attempt 2 of 3)",
        "model call failed (attempt 3 of 3)",
    ]
    assert all("Error code: 500 - upstream exploded" in r.getMessage() for r in failures)
    assert all(r.exc_info is None for r in failures)
    assert not any("Retrying request" in r.getMessage() for r in caplog.records)


async def test_a_non_transient_provider_error_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    with FakeOpenAI(api_key="the-right-key") as server:
        config = _config(_model(server, api_key="a-wrong-key"))
        client = DeerFlowClient(config, extensions=LoadedExtensions.empty())
        caplog.set_level(logging.WARNING)
        with pytest.raises(Exception, match="Incorrect API key"):
            await client.arun("hello")
        assert len(server.completions()) == 1
    (line,) = [r.getMessage() for r in caplog.records if "model call failed" in r.getMessage()]
    assert "Error code: 401 - Incorrect API key" in line and line.endswith("not retried (not transient)")
