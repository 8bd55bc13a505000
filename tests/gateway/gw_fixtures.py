"""Test doubles for the Gateway suite: a scriptable agent host, recording extensions, routers.

Contributions are installed through the real loader (``use: "gateway.gw_fixtures:..."``)
or through ``HostRegistry`` directly, so the code under test sees real ``LoadedExtensions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI

from deerflow_ext.agents.host import LeadRunResult, TokenUsage
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions

EVENTS: list[tuple[str, str, float]] = []  # (what, run_id, monotonic time), shared per test


def record(what: str, run_id: str) -> None:
    EVENTS.append((what, run_id, time.monotonic()))


def when(what: str, run_id: str) -> float:
    return next(t for w, r, t in EVENTS if w == what and r == run_id)


def kinds(run_id: str) -> list[str]:
    return [w for w, r, _ in EVENTS if r == run_id]


class LifecycleRecorder:
    """Records start/stop (with outcome); ``stop_delay`` makes on_task_stop slow."""

    def __init__(self, stop_delay: float = 0.0) -> None:
        self.stop_delay = stop_delay
        self.outcomes: dict[str, str] = {}
        self.stores: dict[str, list[Any]] = {}

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        assert info.kind == "lead" and info.task_id == info.run_id
        self.stores.setdefault(info.run_id, []).append(task_store)
        record("start", info.run_id)

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        record("stop-begin", info.run_id)
        self.stores.setdefault(info.run_id, []).append(task_store)
        self.outcomes[info.run_id] = outcome.value
        if self.stop_delay:
            await asyncio.sleep(self.stop_delay)
        record("stop-end", info.run_id)


@dataclass
class ServiceRecorder:
    name: str
    log: list[str]
    fail_start: bool = False
    deps: Any = None

    async def start(self, deps: Any) -> None:
        self.deps = deps
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.log.append(f"start:{self.name}")

    async def stop(self) -> None:
        self.log.append(f"stop:{self.name}")


@dataclass
class FakeAgentHost:
    """Answers (after ``delay`` seconds when the prompt says "slow"); emits each streamed kind."""

    delay: float = 0.0
    fail: bool = False
    calls: list[Any] = field(default_factory=list)
    memory: Any = None
    closed: bool = False

    async def run_lead(self, request: Any, *, extensions: Any, task_store: Any, emit: Any = None) -> LeadRunResult:
        self.calls.append((request, extensions, task_store))
        record("agent-begin", request.run_id)
        try:
            text = request.messages[-1]["content"]
            if emit is not None:
                await emit("messages", [{"type": "AIMessageChunk", "content": "echo"}, {"langgraph_node": "model"}])
            if "slow" in str(text):
                await asyncio.sleep(self.delay)
            if self.fail:
                raise ValueError("the model is on fire")
            if emit is not None:
                await emit("updates", {"model": {"messages": [{"type": "ai", "content": f"echo: {text}"}]}})
                await emit("values", {"messages": [{"type": "ai", "content": f"echo: {text}"}]})
            return LeadRunResult(f"echo: {text}", TokenUsage(3, 4, 7), f"Title {text}"[:20], None, 0)
        finally:
            record("agent-end", request.run_id)

    async def aclose(self) -> None:
        self.closed = True


if TYPE_CHECKING:  # mypy (the ``types`` session) checks the double against the worker's Protocol
    from deerflow_ext.runtime import LeadRunner

    _AS_LEAD_RUNNER: LeadRunner = FakeAgentHost()


def extensions_with(
    *, lifecycle: Any = None, services: tuple[Any, ...] = (), routers: tuple[Any, ...] = ()
) -> LoadedExtensions:
    """A real frozen snapshot holding the given contributions (one entry per kind)."""
    registry = HostRegistry()
    loaded = []
    position = 0
    if lifecycle is not None:
        registry.begin(position, "recorder", "gateway.gw_fixtures:lifecycle")
        registry.task_lifecycle(lifecycle)
        registry.end()
        loaded.append("gateway.gw_fixtures:lifecycle")
        position += 1
    for service in services:
        use = f"gateway.gw_fixtures:{service.name}"
        registry.begin(position, service.name, use)
        registry.service(service)
        registry.end()
        loaded.append(use)
        position += 1
    if routers:
        registry.begin(position, "routers", "gateway.gw_fixtures:routers")
        registry.routers(list(routers))
        registry.end()
        loaded.append("gateway.gw_fixtures:routers")
        position += 1
    return registry.freeze(loaded=tuple(loaded), total=position)


# -- routers installed through the real loader --------------------------------------------


def good_router() -> APIRouter:
    router = APIRouter(prefix="/acme")

    @router.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "acme"}

    @router.get("/threads/{thread_id}")  # same template shape as a host route, different path
    async def thread(thread_id: str) -> dict[str, str]:
        return {"thread": thread_id}

    return router


def install_good(registry: Any, config: Mapping[str, Any]) -> None:
    registry.routers([good_router()])


def install_shadowing(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.get("/api/threads/{tid}")  # the host's GET /api/threads/{thread_id}, renamed param
    async def steal(tid: str) -> dict[str, str]:
        return {"stolen": tid}

    registry.routers([router])


def install_shadowed(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.get("/api/threads/search")  # the host's earlier /api/threads/{thread_id} takes it
    async def search() -> dict[str, str]:
        return {}

    registry.routers([router])


def install_duplicate(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.get("/acme/ping")  # good_router (earlier entry) already has GET /acme/ping
    async def ping_again() -> dict[str, str]:
        return {}

    registry.routers([router])


def install_other_method(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.post("/acme/ping")  # same path, different method: allowed
    async def post_ping() -> dict[str, str]:
        return {"posted": "yes"}

    registry.routers([router])


def install_websocket(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.get("/ws-ext/info")
    async def info() -> dict[str, str]:
        return {}

    @router.websocket("/ws-ext/socket")
    async def socket(ws: Any) -> None:
        await ws.close()

    registry.routers([router])


def install_mount(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.get("/mount-ext/info")
    async def info() -> dict[str, str]:
        return {}

    router.mount("/mount-ext/static", FastAPI())
    registry.routers([router])


def install_lifespan(registry: Any, config: Mapping[str, Any]) -> None:
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield

    router = APIRouter(lifespan=lifespan)

    @router.get("/lifespan-ext/info")
    async def info() -> dict[str, str]:
        return {}

    registry.routers([router])


def install_nested(registry: Any, config: Mapping[str, Any]) -> None:
    """A router that includes another (the common way to split an API): safe, it mounts."""
    inner = APIRouter(prefix="/inner")

    @inner.get("/info")
    async def info() -> dict[str, str]:
        return {"nested": "yes"}

    outer = APIRouter(prefix="/nested-ext")
    outer.include_router(inner)
    registry.routers([outer])


def install_nested_lifespan(registry: Any, config: Mapping[str, Any]) -> None:
    """A lifespan hidden in an included router is still a lifespan."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield

    inner = APIRouter(prefix="/inner", lifespan=lifespan)

    @inner.get("/info")
    async def info() -> dict[str, str]:
        return {}

    outer = APIRouter(prefix="/nested-lifespan-ext")
    outer.include_router(inner)
    registry.routers([outer])


def install_startup(registry: Any, config: Mapping[str, Any]) -> None:
    async def on_start() -> None:
        return None

    router = APIRouter(on_startup=[on_start])

    @router.get("/startup-ext/info")
    async def info() -> dict[str, str]:
        return {}

    registry.routers([router])


INSTALLS: list[str] = []  # one name per call of a counting install function


def install_route(registry: Any, config: Mapping[str, Any]) -> None:
    """One route, ``config["method"] config["path"]``, answering which extension it is."""
    router = APIRouter()

    async def answer() -> dict[str, str]:
        return {"answered_by": "install_route"}

    router.add_api_route(config["path"], answer, methods=[config["method"]])
    registry.routers([router])


def install_in_order(registry: Any, config: Mapping[str, Any]) -> None:
    """Overlapping but distinct templates, each pair in the order FastAPI APIs write them."""
    router = APIRouter()

    @router.get("/items/search")
    async def search() -> dict[str, str]:
        return {"route": "items/search"}

    @router.get("/items/{item_id}")
    async def item(item_id: str) -> dict[str, str]:
        return {"route": "items/{item_id}", "item_id": item_id}

    @router.get("/records/{v:int}")
    async def record_number(v: int) -> dict[str, Any]:
        return {"route": "records/{v:int}", "v": v}

    @router.get("/records/new")
    async def record_new() -> dict[str, str]:
        return {"route": "records/new"}

    @router.get("/files/{rest:path}")
    async def file_path(rest: str) -> dict[str, str]:
        return {"route": "files/{rest:path}", "rest": rest}

    @router.get("/files/{file_id}")
    async def file_id(file_id: str) -> dict[str, str]:  # reached by nothing: FastAPI's order
        return {"route": "files/{file_id}"}

    registry.routers([router])


def install_non_callable(registry: Any, config: Mapping[str, Any]) -> None:
    """A router one of whose routes has lost its endpoint (``None``) after being declared."""
    router = APIRouter()

    @router.get("/broken-ext/fine")
    async def fine() -> dict[str, str]:
        return {}

    @router.get("/broken-ext/gone")
    async def gone() -> dict[str, str]:
        return {}

    router.routes[-1].endpoint = None  # type: ignore[attr-defined]
    registry.routers([router])


class _NotAField:
    """A parameter type FastAPI cannot build a route for."""


def install_unbuildable(registry: Any, config: Mapping[str, Any]) -> None:
    """A callable endpoint swapped in after declaration whose parameter FastAPI cannot
    build: ``include_router`` (or, on newer FastAPI, the first request) fails on it."""
    router = APIRouter()

    @router.get("/unbuildable-ext/fine")
    async def fine() -> dict[str, str]:
        return {}

    @router.get("/unbuildable-ext/odd")
    async def odd() -> dict[str, str]:
        return {}

    async def takes_odd(value: _NotAField) -> dict[str, str]:
        return {}

    router.routes[-1].endpoint = takes_odd  # type: ignore[attr-defined]
    registry.routers([router])


def install_counting(registry: Any, config: Mapping[str, Any]) -> None:
    INSTALLS.append("install_counting")
    registry.task_lifecycle(LifecycleRecorder())


KIND_EVENTS: list[tuple[str, str, str]] = []  # (start|stop, kind, outcome) for install_slow_subagent


class _KindRecorder:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        KIND_EVENTS.append(("start", info.kind, ""))

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        KIND_EVENTS.append(("stop", info.kind, outcome.value))


def _slow_subagent_middleware() -> Any:
    from langchain.agents.middleware import AgentMiddleware

    class SlowModel(AgentMiddleware[Any]):
        """Holds every subagent model call, so a shutdown finds the subagent in flight."""

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            await asyncio.sleep(60)
            return await handler(request)

    return SlowModel()


class _SlowSubagents:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        from deerflow_extension_api import AgentScope, MiddlewarePlacement, Placement

        return (MiddlewarePlacement(_slow_subagent_middleware(), Placement.MODEL_LOGICAL, AgentScope.SUBAGENT),)


def install_slow_subagent(registry: Any, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(_KindRecorder())
    registry.middlewares(_SlowSubagents())
