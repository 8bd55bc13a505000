"""The suite's own footing: every server it drives answers the calls the other cases build on."""

from __future__ import annotations

from typing import Any

import pytest
from platform_support import human

pytestmark = pytest.mark.e2e


def test_a_thread_and_a_run_through_the_sync_client(client: Any) -> None:
    thread = client.threads.create()
    values = client.runs.wait(thread["thread_id"], "lead_agent", input=human("hello"))
    assert values["messages"][-1]["type"] == "ai"


async def test_a_thread_and_a_run_through_the_async_client(aclient: Any) -> None:
    thread = await aclient.threads.create()
    values = await aclient.runs.wait(thread["thread_id"], "lead_agent", input=human("hello"))
    assert values["messages"][-1]["type"] == "ai"
