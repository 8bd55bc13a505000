"""An intercepting middleware whose model answer no database can store.

SQLite cannot encode a lone surrogate as UTF-8, PostgreSQL refuses NUL in text: the run
produces a completion that fails to save, which must still end with a terminal status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage

from deerflow_extension_api import MiddlewarePlacement, Placement, extension

UNSTORABLE = "cannot be stored: \ud800 and \x00"


class Unstorable(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return AIMessage(content=UNSTORABLE)


class Contributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(Unstorable(), Placement.STANDARD)]


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(Contributor())
