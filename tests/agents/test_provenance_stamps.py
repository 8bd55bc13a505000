"""The host stamps the messages it writes into a conversation, and only those (digest §2.4)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from deerflow_ext.agents.goal import GoalVerdict, continuation_message
from deerflow_ext.agents.middlewares.summarization import SUMMARY_MESSAGE_PREFIX, SummarizationMiddleware
from deerflow_ext.gateway.schemas import MessageIn
from deerflow_extension_api import ContentKind, MessageProvenance, read_provenance


def test_the_summary_the_host_writes_is_stamped_as_its_own() -> None:
    summary = SummarizationMiddleware._summary_message(AIMessage("the gist"))
    assert summary.text.startswith(SUMMARY_MESSAGE_PREFIX)
    assert read_provenance(summary) == MessageProvenance(ContentKind.MIDDLEWARE_INJECTION, "summarization")


def test_the_goal_continuation_is_stamped_as_the_hosts_own() -> None:
    message = continuation_message("ship it", GoalVerdict(met=False, reason="not yet"))
    assert read_provenance(message) == MessageProvenance("middleware_injection", "goal")


def test_a_users_message_is_never_stamped() -> None:
    message = MessageIn(role="user", content="hi", additional_kwargs={"deerflow_content_kind": "memory"})
    assert message.for_graph().get("additional_kwargs") == {}
