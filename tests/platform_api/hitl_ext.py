"""A test extension that gates the ``task`` tool behind a human, loaded as ``hitl_ext:install``.

It contributes LangChain's own ``HumanInTheLoopMiddleware`` through the ordinary middleware
contract, as a product extension would: no API of the host's beyond what any extension
has. A run whose model calls ``task`` (the embedded model does for ``delegate: ...``) pauses
with an interrupt; a run with ``command={"resume": {"decisions": [...]}}`` approves or
rejects the call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware

from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement, extension


class GateTaskTool:
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        middleware = HumanInTheLoopMiddleware(interrupt_on={"task": {"allowed_decisions": ["approve", "reject"]}})
        return (MiddlewarePlacement(middleware, Placement.STANDARD),)


@extension(api="0.2.0", name="hitl")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(GateTaskTool())
