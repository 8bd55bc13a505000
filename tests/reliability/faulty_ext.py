"""A misbehaving extension for the fault-injection matrix, configured per entry.

``config = {"kind": <contribution kind>, "mode": "raise" | "hang" | "cancel" | "interrupt" |
"exit"}`` puts one fault in one place; everything else the extension registers behaves.
``cancel`` is a *self-inflicted* ``asyncio.CancelledError`` (raised by the contributor, not by
the host), ``interrupt`` raises ``KeyboardInterrupt``, ``exit`` calls ``sys.exit(7)``. The
``subagent_start`` / ``subagent_stop`` kinds fault only in a subagent's lifecycle hooks. Faults
in the agent's own path fire only for prompts containing ``FAULT`` where the contributor can
see the prompt (``wrap``, ``system``), so a second, clean run shows whether the Gateway still
serves.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import MiddlewarePlacement, Placement, extension

ATTRIBUTION = "faulty_ext:install"
CALLS: list[tuple[str, str]] = []  # (kind, what) of every call reached, per process
_lock = threading.Lock()


def _note(kind: str, what: str) -> None:
    with _lock:
        CALLS.append((kind, what))


class InjectedFault(RuntimeError):
    pass


def _sync_fault(mode: str, where: str) -> None:
    if mode == "raise":
        raise InjectedFault(f"injected fault in {where}")
    if mode == "cancel":
        raise asyncio.CancelledError(f"self-inflicted cancel in {where}")
    if mode == "interrupt":
        raise KeyboardInterrupt(f"injected interrupt in {where}")
    if mode == "exit":
        sys.exit(7)
    if mode == "hang":
        raise AssertionError("synchronous hangs are not injected: they would block the loop")


async def _fault(mode: str, where: str) -> None:
    if mode == "hang":
        await asyncio.sleep(3600)
    _sync_fault(mode, where)


def _text_of(messages: Any) -> str:
    return " ".join(str(getattr(m, "content", m)) for m in messages or ())


class FaultyMiddleware(AgentMiddleware):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        _note("wrap", "awrap_model_call")
        if "FAULT" in _text_of(getattr(request, "messages", ())):
            await _fault(self.mode, "awrap_model_call")
        return await handler(request)

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        _note("wrap", "wrap_model_call")
        if "FAULT" in _text_of(getattr(request, "messages", ())):
            _sync_fault(self.mode, "wrap_model_call")
        return handler(request)


class PassMiddleware(AgentMiddleware):
    pass


class Contributor:
    def __init__(self, kind: str, mode: str) -> None:
        self.kind, self.mode = kind, mode

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        _note("contribute", str(ctx.agent_name))
        if self.kind == "contribute":
            _sync_fault(self.mode, "contribute_middlewares")
        if self.kind == "wrap":
            return [MiddlewarePlacement(FaultyMiddleware(self.mode), Placement.STANDARD)]
        return [MiddlewarePlacement(PassMiddleware(), Placement.STANDARD)]


class Lifecycle:
    def __init__(self, kind: str, mode: str) -> None:
        self.kind, self.mode = kind, mode

    def _faults(self, what: str, info: Any) -> bool:
        return self.kind == f"lifecycle_{what}" or (self.kind == f"subagent_{what}" and info.kind == "subagent")

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        _note("lifecycle_start" if info.kind == "lead" else "subagent_start", info.run_id)
        if self._faults("start", info):
            await _fault(self.mode, "on_task_start")

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        _note("lifecycle_stop" if info.kind == "lead" else "subagent_stop", f"{info.run_id}:{outcome.value}")
        if self._faults("stop", info):
            await _fault(self.mode, "on_task_stop")


class SystemObserver:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> None:
        _note("system", kind.value)
        if "FAULT" in _text_of(request.messages):
            await _fault(self.mode, "on_system_model_call")


class AssemblyObserver:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        _note("assembly", descriptor.agent_name)
        _sync_fault(self.mode, "on_agent_assembled")


class CompactionObserver:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def on_context_compacted(self, app_store: Any, task_store: Any, event: Any) -> None:
        _note("compaction", str(event.compacted_message_count))
        await _fault(self.mode, "on_context_compacted")


class Service:
    def __init__(self, kind: str, mode: str, name: str) -> None:
        self.kind, self.mode, self.name = kind, mode, name

    async def start(self, deps: Any) -> None:
        _note("service_start", self.name)
        if self.kind == "service_start":
            await _fault(self.mode, "start")

    async def stop(self) -> None:
        _note("service_stop", self.name)
        if self.kind == "service_stop":
            await _fault(self.mode, "stop")


def _router(mode: str) -> APIRouter:
    router = APIRouter(prefix="/faulty")

    @router.get("/boom")
    async def boom() -> dict[str, str]:
        _note("router", "boom")
        await _fault(mode, "router")
        return {"never": "reached"}

    @router.get("/ok")
    async def ok() -> dict[str, str]:
        return {"ok": "faulty"}

    return router


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    """Registers one contributor of every kind; ``config`` says which one misbehaves."""
    kind, mode = str(config.get("kind", "")), str(config.get("mode", "raise"))
    if kind == "install_halfway":
        registry.task_lifecycle(Lifecycle("", mode))
        registry.service(Service("", mode, "halfway"))
        _sync_fault(mode, "install")
    registry.middlewares(Contributor(kind, mode))
    registry.task_lifecycle(Lifecycle(kind, mode))
    registry.system_model_observer(SystemObserver(mode if kind == "system" else "none"))
    if kind in ("assembly",):
        registry.agent_assembly_observer(AssemblyObserver(mode))
    if kind == "compaction":
        registry.context_compaction_observer(CompactionObserver(mode))
    registry.service(Service(kind, mode, "faulty"))
    registry.routers([_router(mode if kind == "router" else "none")])


@extension(api="9.0.0")
def wrong_api(registry: Any, config: Mapping[str, Any]) -> None:
    registry.service(Service("", "none", "wrong_api"))
