"""A test extension whose middleware searches the graph's store by meaning, loaded as
``semantic_recall_ext:install``.

A user message ``recall:<label> <words>`` makes the middleware, before the model is called,
search ``(notes, <label>)`` through ``runtime.store`` with ``query=<words>`` and write the keys
and scores it found, best first, to ``(recalled, <label>)``/``last``: what an extension's
middleware does to remember, and what the client then reads back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement, extension

_ASK = re.compile(r"recall:([\w-]+) (.+)")


class Recall(AgentMiddleware):
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = [m for m in state.get("messages", ()) if getattr(m, "type", None) == "human"]
        found = _ASK.search(str(messages[-1].text)) if messages else None
        if found is None or runtime.store is None:
            return None
        label, words = found.groups()
        hits = await runtime.store.asearch(("notes", label), query=words, limit=3)
        await runtime.store.aput(("recalled", label), "last", {"hits": [[hit.key, hit.score] for hit in hits]})
        return None


class RecallContributor:
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(Recall(), Placement.STANDARD),)


@extension(api="0.2.0", name="semantic-recall")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(RecallContributor())
