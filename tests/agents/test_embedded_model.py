"""The embedded model's rules: each is what some host path depends on offline."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from deerflow_ext.agents.embedded_model import EmbeddedChatModel, TransientModelError
from deerflow_ext.agents.goal import parse_verdict
from deerflow_ext.agents.models import (
    create_chat_model,
    effective_model_name,
    public_model_parameters,
    shared_model_factory,
)
from deerflow_ext.agents.prompts import (
    SUMMARY_MARKER,
    render_goal_prompt,
    render_memory_prompt,
    render_summary_prompt,
    render_title_prompt,
)
from deerflow_ext.config.schema import AppConfig


@tool
def task(description: str, prompt: str) -> str:
    """Delegate."""
    return prompt


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def test_delegate_calls_the_task_tool_only_when_it_is_bound() -> None:
    model = EmbeddedChatModel()
    reply = model.bind_tools([task]).invoke([HumanMessage("delegate: count the stars")])
    assert reply.tool_calls[0]["name"] == "task"
    assert reply.tool_calls[0]["args"] == {"description": "count the stars", "prompt": "count the stars"}
    # Without a task tool (a subagent) it answers the task itself.
    plain = model.invoke([HumanMessage("delegate: count the stars")])
    assert not plain.tool_calls and "count the stars" in plain.text


def test_use_calls_the_named_tool_with_json_args() -> None:
    reply = EmbeddedChatModel().bind_tools([echo]).invoke('use echo {"text": "hi"}')
    assert reply.tool_calls[0]["name"] == "echo" and reply.tool_calls[0]["args"] == {"text": "hi"}
    unknown = EmbeddedChatModel().bind_tools([echo]).invoke('use nope {"text": "hi"}')
    assert not unknown.tool_calls


def test_answers_with_the_tool_result_after_a_tool_message() -> None:
    messages = [
        HumanMessage("use echo {}"),
        AIMessage("", tool_calls=[{"name": "echo", "args": {}, "id": "c1"}]),
        ToolMessage("RESULT-42", tool_call_id="c1", name="echo"),
    ]
    assert "RESULT-42" in EmbeddedChatModel().invoke(messages).text


def test_plain_text_gets_a_deterministic_answer_with_fresh_ids_and_usage() -> None:
    model = EmbeddedChatModel()
    first, second = model.invoke("what is deerflow?"), model.invoke("what is deerflow?")
    assert first.text == second.text and "what is deerflow?" in first.text
    assert first.id != second.id
    usage = first.usage_metadata
    assert usage is not None and usage["input_tokens"] == 3
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 3


def test_host_prompts_get_well_formed_output() -> None:
    model = EmbeddedChatModel()
    title = model.invoke(render_title_prompt("plan a trip to Lisbon in May please", "Sure", max_chars=20)).text
    assert title and len(title) <= 20 and "\n" not in title and title.startswith("Plan a trip")
    facts = json.loads(model.invoke(render_memory_prompt([HumanMessage("I like green tea")])).text)
    assert facts == ["The user said: I like green tea"]
    summary = model.invoke(render_summary_prompt([HumanMessage("alpha"), AIMessage("beta")])).text
    assert "alpha" in summary and SUMMARY_MARKER not in summary


@pytest.mark.parametrize(("goal", "met_at"), [("say hi", 1), ("finish after 3 turns", 3)])
def test_goal_verdict_is_met_after_n_evaluations(goal: str, met_at: int) -> None:
    model = EmbeddedChatModel()
    verdicts = [
        parse_verdict(model.invoke([SystemMessage(render_goal_prompt(goal, evaluation=k)), HumanMessage("x")]).text)
        for k in range(1, 5)
    ]
    assert [v.met for v in verdicts] == [k >= met_at for k in range(1, 5)]


def test_never_goal_is_never_met_and_garbage_counts_as_not_met() -> None:
    raw = EmbeddedChatModel().invoke(render_goal_prompt("never stop", evaluation=9)).text
    assert json.loads(raw)["met"] is False
    assert parse_verdict("no json here").met is False


def test_fail_times_raises_transient_errors_first() -> None:
    model = EmbeddedChatModel(fail_times=2)
    for _ in range(2):
        with pytest.raises(TransientModelError):
            model.invoke("hi")
    assert model.invoke("hi").text
    assert model.calls == 3


def test_create_chat_model_defaults_to_embedded_and_imports_by_use() -> None:
    assert isinstance(create_chat_model(AppConfig()), EmbeddedChatModel)
    config = AppConfig.model_validate(
        {
            "models": [
                {
                    "name": "local",
                    "use": "deerflow_ext.agents.embedded_model:EmbeddedChatModel",
                    "model_name": "local-1",
                    "fail_times": 1,
                    "api_key": "sk-secret",
                }
            ]
        }
    )
    model = create_chat_model(config, "local")
    assert isinstance(model, EmbeddedChatModel) and model.fail_times == 1
    assert effective_model_name(model) == "local-1"
    assert "api_key" not in public_model_parameters(config, "local")
    with pytest.raises(ValueError, match="unknown model"):
        create_chat_model(config, "missing")


def test_a_hosts_factory_makes_each_configured_model_once_and_the_embedded_one_per_run() -> None:
    remote = {"use": "langchain_openai:ChatOpenAI", "model": "m", "api_key": "k", "base_url": "http://127.0.0.1:9/v1"}
    config = AppConfig.model_validate(
        {
            "models": [
                {"name": "remote", **remote},
                {"name": "local", "use": "deerflow_ext.agents.embedded_model:EmbeddedChatModel", "fail_times": 1},
            ]
        }
    )
    factory = shared_model_factory(config)
    first = factory("remote")
    assert factory("remote") is first and factory(None) is not first  # one instance per name asked
    assert factory(None).model_name == first.model_name == "m"  # type: ignore[attr-defined]
    assert factory("local") is not factory("local")  # its failure count is a run's own
    assert shared_model_factory(config)("remote") is not first  # per host, not per process
