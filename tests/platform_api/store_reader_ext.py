"""A test extension whose middleware uses the graph's store, loaded as ``store_reader_ext:install``.

A user message containing ``store:<label>/<key>`` makes the middleware, before the model is
called, read the item ``(notes, <label>)``/``<key>`` through ``runtime.store`` (the store
LangGraph hands a graph's nodes) and write what it saw to ``(seen, <label>)``/``<key>`` as
``{"read": <value or None>}``, also streaming it as a ``custom`` event. So a client that put
the note with ``client.store.put_item`` can check both directions: the run read the client's
item, and the client reads back the run's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.config import get_stream_writer

from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement, extension

_ASK = re.compile(r"store:([\w-]+)/([\w-]+)")


def _last_human_text(messages: Sequence[Any]) -> str:
    for message in reversed(list(messages)):
        if getattr(message, "type", None) == "human":
            return str(message.text)
    return ""


class StoreReader(AgentMiddleware):
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        found = _ASK.search(_last_human_text(state.get("messages", ())))
        if found is None:
            return None
        label, key = found.groups()
        store = runtime.store
        if store is None:
            get_stream_writer()({"store": None})
            return None
        item = await store.aget(("notes", label), key)
        seen = None if item is None else item.value
        await store.aput(("seen", label), key, {"read": seen})
        get_stream_writer()({"store": {"label": label, "key": key, "read": seen}})
        return None


class StoreReaderContributor:
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(StoreReader(), Placement.STANDARD),)


@extension(api="0.2.0", name="store-reader")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(StoreReaderContributor())
