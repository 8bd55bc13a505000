"""A test extension that holds a run at a gate, loaded as ``sdk_gate_ext:install``.

A user message containing ``gate:<name>`` stops the run inside its model call until the
file ``<gate_dir>/<name>`` exists, so a test can act while the run is certainly in
progress (drop its stream, cancel it from another process) and then let it finish. The
gate is a file so that it works across processes. Around the wait the middleware writes
two ``custom`` stream events (``{"gate": name, "state": "waiting" | "open"}``), which is
also what the ``custom`` stream mode is tested with.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.config import get_stream_writer

from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement, extension

_GATE = re.compile(r"gate:([\w-]+)")


def _last_human_text(request: Any) -> str:
    for message in reversed(list(getattr(request, "messages", ()) or ())):
        if getattr(message, "type", None) == "human":
            return str(message.text)
    return ""


class Gate(AgentMiddleware):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        found = _GATE.search(_last_human_text(request))
        if found and not any(getattr(m, "type", None) == "tool" for m in request.messages):
            name = found.group(1)
            write = get_stream_writer()
            write({"gate": name, "state": "waiting"})
            while not (self.directory / name).exists():  # noqa: ASYNC110  (a file: works across processes)
                await asyncio.sleep(0.02)
            write({"gate": name, "state": "open"})
        return await handler(request)


class GateContributor:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(Gate(self.directory), Placement.STANDARD),)


@extension(api="0.2.0", name="sdk-gate")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(GateContributor(Path(config["gate_dir"])))
