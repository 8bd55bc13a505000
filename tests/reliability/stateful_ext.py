"""A stateful extension for the concurrency soak and the crash test.

Per run it keeps a ``RunMark`` in the task store and counts model calls there; the app store
holds process-wide tallies. Every check that could reveal cross-run leakage is recorded in
``LEDGER`` (the test asserts on it): the mark seen by middleware and by ``on_task_stop`` must
be the one ``on_task_start`` put in *this* run's store. With ``config["table"]`` a service
creates ``relx_events`` and each start/stop inserts a row (the crash test's prefixed table).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import MiddlewarePlacement, Placement, extension, task_store_from_runtime


@dataclass
class RunMark:
    run_id: str
    model_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self) -> None:
        with self._lock:
            self.model_calls += 1


@dataclass
class Tally:
    starts: int = 0
    stops: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass
class Ledger:
    starts: list[str] = field(default_factory=list)
    stops: list[tuple[str, str, int]] = field(default_factory=list)  # run_id, outcome, model calls
    leaks: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, what: str, value: Any) -> None:
        with self._lock:
            getattr(self, what).append(value)

    def clear(self) -> None:
        with self._lock:
            self.starts.clear()
            self.stops.clear()
            self.leaks.clear()


LEDGER = Ledger()


class MarkCheckingMiddleware(AgentMiddleware):
    """Counts model calls in the run's own mark; sleeps on prompts containing ``SLOW``."""

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        store = task_store_from_runtime(request.runtime)
        context = getattr(request.runtime, "context", None) or {}
        mark = store.get(RunMark) if store is not None else None
        if mark is None or mark.run_id != context.get("run_id"):
            LEDGER.add("leaks", f"model call of {context.get('run_id')} saw {mark}")
        else:
            mark.bump()
        if request.messages and "SLOW" in str(getattr(request.messages[-1], "content", "")):
            await asyncio.sleep(30)
        return await handler(request)


class Contributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        if ctx.agent_name not in (None, "lead"):
            return []
        return [MiddlewarePlacement(MarkCheckingMiddleware(), Placement.STANDARD)]


class Lifecycle:
    def __init__(self, table: bool) -> None:
        self.table = table

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        if task_store.get(RunMark) is not None:
            LEDGER.add("leaks", f"{info.run_id} started with a mark already in its store")
        task_store.set(RunMark(info.run_id))
        tally = app_store.get_or_init(Tally, Tally)
        with tally._lock:
            tally.starts += 1
        LEDGER.add("starts", info.run_id)
        if self.table:
            await _insert(app_store, info.run_id, "start")

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        mark = task_store.get(RunMark)
        if mark is None or mark.run_id != info.run_id:
            LEDGER.add("leaks", f"{info.run_id} stopped with mark {mark}")
        tally = app_store.get_or_init(Tally, Tally)
        with tally._lock:
            tally.stops += 1
        LEDGER.add("stops", (info.run_id, outcome.value, mark.model_calls if mark else -1))
        if self.table:
            await _insert(app_store, info.run_id, "stop")


@dataclass
class SessionHolder:
    factory: Any


async def _insert(app_store: Any, run_id: str, what: str) -> None:
    from sqlalchemy import text

    holder = app_store.get(SessionHolder)
    if holder is None:
        return
    async with holder.factory.begin() as session:
        await session.execute(text("INSERT INTO relx_events (run_id, what) VALUES (:r, :w)"), {"r": run_id, "w": what})


class TableService:
    async def start(self, deps: Any) -> None:
        from sqlalchemy import text

        async with deps.session_factory.begin() as session:
            await session.execute(
                text("CREATE TABLE IF NOT EXISTS relx_events (id INTEGER PRIMARY KEY, run_id TEXT, what TEXT)")
            )
        deps.app_store.set(SessionHolder(deps.session_factory))

    async def stop(self) -> None:
        return None


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    table = bool(config.get("table"))
    registry.middlewares(Contributor())
    registry.task_lifecycle(Lifecycle(table))
    if table:
        registry.service(TableService())
