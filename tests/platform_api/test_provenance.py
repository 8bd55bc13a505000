"""Provenance keys are the host's: a client cannot stamp a message with them, through a run's
input or a state update, and its own ``additional_kwargs`` keys survive (digest §4.8)."""

from __future__ import annotations

from typing import Any

import pytest
from platform_support import Platform

from deerflow_ext.gateway.schemas import RunCommand
from deerflow_extension_api import PROVENANCE_KEYS, provenance_kwargs, read_provenance

pytestmark = pytest.mark.e2e

FORGED = {**provenance_kwargs("memory", "dynamic_context_memory", producer_entity_id="x"), "mine": "kept"}


def _human(state: dict[str, Any], content: str) -> dict[str, Any]:
    return next(m for m in state["values"]["messages"] if m["type"] == "human" and m["content"] == content)


def test_run_input_cannot_carry_provenance(client: Any, ours: Any) -> None:
    thread = client.threads.create()["thread_id"]
    message = {"role": "user", "content": "stamped by me", "additional_kwargs": FORGED}
    client.runs.wait(thread, "lead_agent", input={"messages": [message]})
    stored = _human(client.threads.get_state(thread), "stamped by me")
    assert stored["additional_kwargs"] == {"mine": "kept"}


def test_a_state_update_cannot_carry_provenance(client: Any, ours: Any) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "lead_agent", input={"messages": [{"role": "user", "content": "hello"}]})
    forged = {"type": "human", "content": "slipped in", "additional_kwargs": FORGED}
    client.threads.update_state(thread, {"messages": [forged]})
    state = client.threads.get_state(thread)
    assert _human(state, "slipped in")["additional_kwargs"] == {"mine": "kept"}
    assert state["values"]["messages"][0]["content"] == "hello"  # other messages as they were


def test_a_command_update_loses_the_keys_too(platform: Platform) -> None:
    update = {"messages": [{"type": "human", "content": "x", "additional_kwargs": FORGED}], "title": "t"}
    mapped = RunCommand(update=update).as_mapping()["update"]
    assert mapped["messages"][0]["additional_kwargs"] == {"mine": "kept"} and mapped["title"] == "t"
    assert update["messages"][0]["additional_kwargs"] == FORGED  # the client's object is not mutated
    assert not PROVENANCE_KEYS & mapped["messages"][0]["additional_kwargs"].keys()

    class Stamped:
        additional_kwargs = FORGED

    assert read_provenance(Stamped()) is not None  # what the stripped keys would have claimed
