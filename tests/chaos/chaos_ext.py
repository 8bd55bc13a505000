"""Extensions the chaos suite loads into real Gateway processes (this folder is on their
``PYTHONPATH``): one well-behaved, the rest hostile on demand.

Behaviour is chosen by markers in the run's prompt, so one process can carry every hostile
extension next to the well-behaved one and ordinary runs stay ordinary:

* ``chaos_ext:install`` (well-behaved): ``slow:<s>`` sleeps in the model call (a run in
  flight where a fault must find it); ``tick:<n>:<ms>[:<bytes>]`` publishes ``n`` custom
  stream events ``ms`` apart, each padded with ``bytes`` (the token gaps the stream case
  measures); with ``config["log"]`` every lead run's start and stop is appended to that
  file, one JSON line each (what the other cases check the well-behaved extension saw).
* ``install_hog``: ``hog:<mib>`` allocates and touches that many MiB for the model call.
* ``install_blocker``: ``block:<s>`` calls ``time.sleep`` — a synchronous call on the loop.
* ``install_recursor``: every run's ``on_task_start`` and every system model call's observer
  recurse past the interpreter's limit.
* ``install_big_router``: ``GET /chaos/big?mib=N`` streams N MiB.
* ``install_patcher``: at ``install()`` replaces a host function (``/api/info``'s version
  lookup) — what the trust model says the host cannot prevent.
* ``install_table_writer``: ``POST /chaos/forge/{run_id}`` rewrites that run's outcome in
  the host's ``runs`` table through the session factory the host lends its service.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from langchain.agents.middleware import AgentMiddleware
from sqlalchemy import text

from deerflow_extension_api import MiddlewarePlacement, Placement, extension

_SLOW = re.compile(r"\bslow:(\d+(?:\.\d+)?)")
_TICK = re.compile(r"\btick:(\d+):(\d+)(?::(\d+))?")
_HOG = re.compile(r"\bhog:(\d+)")
_BLOCK = re.compile(r"\bblock:(\d+(?:\.\d+)?)")


def _prompt(request: Any) -> str:
    for message in reversed(list(getattr(request, "messages", ()) or ())):
        if getattr(message, "type", None) == "human":
            return str(message.content)
    return ""


class _Middleware(AgentMiddleware):
    """A middleware whose ``before`` step (sync or async) runs on each model call."""

    def __init__(self, step: Callable[[str], Awaitable[None]]) -> None:
        super().__init__()
        self.step = step

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        await self.step(_prompt(request))
        return await handler(request)


class _Contributor:
    def __init__(self, middleware: AgentMiddleware) -> None:
        self.middleware = middleware

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(self.middleware, Placement.STANDARD),)


async def _slow_and_ticks(prompt: str) -> None:
    if found := _SLOW.search(prompt):
        await asyncio.sleep(float(found.group(1)))
    if found := _TICK.search(prompt):
        from langgraph.config import get_stream_writer

        write = get_stream_writer()
        for i in range(int(found.group(1))):
            write({"tick": i, "t": time.time(), "pad": "." * int(found.group(3) or 0)})
            await asyncio.sleep(int(found.group(2)) / 1000)


class _Ledger:
    def __init__(self, path: str) -> None:
        self.path = path

    def _append(self, what: str, info: Any) -> None:
        line = json.dumps({"what": what, "run": info.run_id, "pid": os.getpid()}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        if info.kind == "lead":
            self._append("start", info)

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        if info.kind == "lead":
            self._append("stop", info)


@extension(api="0.2.0", name="chaos")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Contributor(_Middleware(_slow_and_ticks)))
    if config.get("log"):
        registry.task_lifecycle(_Ledger(str(config["log"])))


async def _hog(prompt: str) -> None:
    if found := _HOG.search(prompt):
        block = b"\x01" * (int(found.group(1)) << 20)  # written, so every page is resident
        await asyncio.sleep(1.5)  # held across a few of the test's RSS samples
        del block


@extension(api="0.2.0", name="hog")
def install_hog(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Contributor(_Middleware(_hog)))


def _sleep_synchronously(seconds: float) -> None:
    time.sleep(seconds)


async def _block(prompt: str) -> None:
    if found := _BLOCK.search(prompt):
        _sleep_synchronously(float(found.group(1)))


@extension(api="0.2.0", name="blocker")
def install_blocker(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Contributor(_Middleware(_block)))


def _deeper(n: int) -> int:
    return _deeper(n + 1) + 1


class _Recursor:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        _deeper(0)

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        return None

    async def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> None:
        _deeper(0)


@extension(api="0.2.0", name="recursor")
def install_recursor(registry: Any, config: Mapping[str, Any]) -> None:
    recursor = _Recursor()
    registry.task_lifecycle(recursor)
    registry.system_model_observer(recursor)


async def _chunks(mib: int) -> AsyncIterator[bytes]:
    chunk = b"x" * (64 * 1024)
    for _ in range(mib * 16):
        yield chunk


@extension(api="0.2.0", name="big_router")
def install_big_router(registry: Any, config: Mapping[str, Any]) -> None:
    router = APIRouter()

    @router.get("/chaos/big")
    async def big(mib: int = 50) -> StreamingResponse:
        return StreamingResponse(_chunks(mib), media_type="application/octet-stream")

    registry.routers([router])


@extension(api="0.2.0", name="patcher")
def install_patcher(registry: Any, config: Mapping[str, Any]) -> None:
    from deerflow_ext.gateway.routes import health

    health.package_version = lambda distribution: "patched-by-extension"


class _Forger:
    def __init__(self) -> None:
        self.session_factory: Any = None

    async def start(self, deps: Any) -> None:
        self.session_factory = deps.session_factory

    async def stop(self) -> None:
        return None


@extension(api="0.2.0", name="table_writer")
def install_table_writer(registry: Any, config: Mapping[str, Any]) -> None:
    forger = _Forger()
    router = APIRouter()

    @router.post("/chaos/forge/{run_id}")
    async def forge(run_id: str) -> dict[str, int]:
        async with forger.session_factory() as session:
            result = await session.execute(text("UPDATE runs SET outcome = 'forged' WHERE id = :id"), {"id": run_id})
            await session.commit()
        return {"rows": int(result.rowcount)}

    registry.service(forger)
    registry.routers([router])
