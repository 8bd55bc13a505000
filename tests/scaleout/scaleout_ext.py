"""The scale-out suite's test extension, loaded by real Gateway subprocesses as
``scaleout_ext:install`` (this folder is put on their ``PYTHONPATH``).

* Its lifecycle contributor appends one JSON line per hook to the file named by
  ``config["log"]``: what, run id, wall-clock time, pid. One ``write`` on an ``O_APPEND``
  file is atomic across processes, so two Gateways can share the file and the test can
  order every run's start and stop on one clock.
* Its middleware makes a run slow on demand: a user message containing ``slow:<seconds>``
  sleeps that long inside the model call, i.e. in the middle of the run, where a SIGKILL
  or a cancel must find it. ``slowstop:<seconds>`` makes the run's ``on_task_stop`` take
  that long (within the 3-second budget), so the run holds its thread while it finalizes
  and a follow-up stays ``pending`` meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import (
    AgentBuildContext,
    ExtensionData,
    MiddlewarePlacement,
    Placement,
    TaskInfo,
    TaskOutcome,
    extension,
    task_store_from_runtime,
)

_SLOW = re.compile(r"(?<![a-z])slow:(\d+(?:\.\d+)?)")
_SLOW_STOP = re.compile(r"slowstop:(\d+(?:\.\d+)?)")


class StopDelay(float):
    """Seconds this run's on_task_stop takes (kept in the task store)."""


class HookLog:
    def __init__(self, path: str) -> None:
        self.path = path

    def _append(self, what: str, info: TaskInfo, **extra: Any) -> None:
        line = json.dumps({"what": what, "run": info.run_id, "t": time.time(), "pid": os.getpid(), **extra})
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        if info.kind == "lead":
            self._append("start", info)

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        if info.kind == "lead":
            delay = task_store.get(StopDelay)
            await asyncio.sleep(0.01 if delay is None else float(delay))  # the barrier must wait
            self._append("stop", info, outcome=outcome.value)


def _last_human_text(request: Any) -> str:
    for message in reversed(list(getattr(request, "messages", ()) or ())):
        if getattr(message, "type", None) == "human":
            return str(message.content)
    return ""


class Sleeper(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        stop = _SLOW_STOP.search(_last_human_text(request))
        store = task_store_from_runtime(getattr(request, "runtime", None))
        if stop and store is not None:
            store.set(StopDelay(float(stop.group(1))))
        found = _SLOW.search(_last_human_text(request))
        if found:
            await asyncio.sleep(float(found.group(1)))
        return await handler(request)


class SlowOnDemand:
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(Sleeper(), Placement.STANDARD),)


@extension(api="0.2.0", name="scaleout")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(HookLog(str(config["log"])))
    registry.middlewares(SlowOnDemand())
