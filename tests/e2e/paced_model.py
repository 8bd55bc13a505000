"""A chat model an operator could configure (``models: [{use: "paced_model:PacedChatModel"}]``)
whose provider misbehaves on request, so a served Gateway can be driven to every task outcome.

It is the embedded model, except for the user's last message: ``fail: ...`` makes the
provider reject the call (a non-transient error: the run fails), ``slow: ...`` makes it take
minutes (so the run can be cancelled while it is in flight: the run is aborted).
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult

from deerflow_ext.agents.embedded_model import EmbeddedChatModel


class ProviderRejected(RuntimeError):
    """Not worth a retry: the run fails."""


class PacedChatModel(EmbeddedChatModel):
    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1] if messages else None
        text = last.content if isinstance(last, HumanMessage) and isinstance(last.content, str) else ""
        if text.startswith("fail:"):
            raise ProviderRejected("the provider rejected the prompt")
        if text.startswith("slow:"):
            await asyncio.sleep(300)
        return await super()._agenerate(messages, *args, **kwargs)
