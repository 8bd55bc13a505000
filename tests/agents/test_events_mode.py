"""The ``events`` stream mode carries the agent's own model calls, never the host's.

Title, goal and summarization prompts quote the conversation and are the host's business
(README: "the host's own model calls never reach a client's stream"). ``events`` is built
from LangChain's callback events, which every model call inside a graph node raises, so
the host's calls must be filtered out of it, as ``messages`` filters them.
"""

from __future__ import annotations

import json
from typing import Any

from agent_helpers import Recorder, make_config, make_host, recording_extensions

from deerflow_ext.agents.host import LeadRunRequest
from deerflow_ext.agents.prompts import GOAL_MARKER, SUMMARY_MARKER, TITLE_MARKER
from deerflow_ext.agents.system_calls import SYSTEM_CALL_TAG
from deerflow_extension_api import SystemOperationKind


async def test_events_mode_carries_the_users_model_call_but_none_of_the_hosts(
    recorder: Recorder, notify_loop: Any
) -> None:
    ext = recording_extensions(recorder, kinds=("system",))
    host = make_host(make_config(summarization={"trigger_messages": 4, "keep_messages": 2}, memory={"enabled": False}))
    store = ext.new_task_store("run-1")
    events: list[dict[str, Any]] = []

    def emit(mode: str, chunk: Any) -> None:
        if mode == "events":
            events.append(chunk)

    turns = ('use calculator {"expression": "1+1"}', "and a trip to Lisbon?")
    for n, text in enumerate(turns):
        request = LeadRunRequest(
            thread_id="t-1",
            run_id=f"run-{n}",
            messages=({"role": "user", "content": text},),
            goal="say hi" if n == 0 else None,
            events=True,
        )
        await host.run_lead(request, extensions=ext, task_store=store, emit=emit)

    # The host did make its calls (so there was something to keep out)...
    kinds = {call[0] for call in recorder.system_calls}
    assert {SystemOperationKind.TITLE, SystemOperationKind.SUMMARIZATION, SystemOperationKind.GOAL} <= kinds
    # ... and the user's model call is in the stream ...
    model_starts = [e for e in events if e["event"] == "on_chat_model_start"]
    assert model_starts and any("Lisbon" in json.dumps(e["data"], default=str) for e in model_starts)
    # ... but no event of a host call, nor any of its prompts.
    assert not [e for e in events if SYSTEM_CALL_TAG in e.get("tags", ())]
    text = json.dumps(events, default=str)
    for marker in (TITLE_MARKER, SUMMARY_MARKER, GOAL_MARKER):
        assert marker not in text, marker
