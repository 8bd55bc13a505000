"""Which assistant a run runs as, and what its configuration adds to the run.

Every assistant runs the one graph (``lead_agent``); what sets one apart is its ``config``
(``configurable``, ``recursion_limit``, ``tags``) and ``context``, which are laid *under*
the run's own: a key the run sets wins, a key only the assistant sets reaches the run.
Tags are joined (the assistant's first), as LangChain merges tags.

The built-in assistant (addressed by its id or by the graph id, which are both
``lead_agent``) has no configuration and cannot be given any (the store refuses), so a run
addressed to it, the common case, resolves without a database read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import HTTPException

from ..persistence.assistant_tables import BUILT_IN_ASSISTANT_ID, AssistantRecord
from ..persistence.assistants import AssistantStore
from .schemas import ASSISTANT_ID, GRAPH_ID, RunConfig, RunCreate
from .state import GatewayRuntime

__all__ = ["BUILT_IN", "ResolvedAssistant", "assistants_of", "resolve_assistant"]


@dataclass(frozen=True)
class ResolvedAssistant:
    """An assistant as a run uses it."""

    assistant_id: str
    graph_id: str = GRAPH_ID
    config: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, record: AssistantRecord) -> ResolvedAssistant:
        return cls(record.assistant_id, record.graph_id, dict(record.config), dict(record.context))

    def under(self, body: RunCreate) -> RunCreate:
        """``body`` with this assistant's config and context beneath its own."""
        if not self.config and not self.context:
            return body
        mine = RunConfig.model_validate(self.config)
        theirs = body.config or RunConfig()
        config = theirs.model_copy(
            update={
                "configurable": {**mine.configurable, **theirs.configurable},
                "tags": list(dict.fromkeys([*mine.tags, *theirs.tags])),
                "recursion_limit": theirs.recursion_limit
                if theirs.recursion_limit is not None
                else mine.recursion_limit,
            }
        )
        return body.model_copy(update={"config": config, "context": {**self.context, **body.context}})


BUILT_IN = ResolvedAssistant(ASSISTANT_ID)
_BUILT_IN_NAMES = frozenset({BUILT_IN_ASSISTANT_ID, ASSISTANT_ID, GRAPH_ID})


def assistants_of(runtime: GatewayRuntime) -> AssistantStore:
    """The assistants in ``runtime``'s database (a store holds nothing but the engine)."""
    return AssistantStore(runtime.engine)


async def resolve_assistant(runtime: GatewayRuntime, assistant_id: str | None) -> ResolvedAssistant:
    """The assistant a run names (None: the built-in one); 404 when there is none such."""
    if assistant_id is None or assistant_id in _BUILT_IN_NAMES:
        return BUILT_IN
    record = await assistants_of(runtime).get(assistant_id)
    if record is None:
        raise HTTPException(status_code=404, detail=f"assistant {assistant_id} not found")
    return ResolvedAssistant.of(record)
