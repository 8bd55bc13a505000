"""A well-behaved extension whose rows exist only in memory until its service stops.

``on_task_stop`` appends the run id to a buffer in the app store; the service creates
``bufx_rows`` at start and writes the whole buffer at stop, nowhere else. A row for a run is
therefore proof that the Gateway went through its ordered shutdown after that run.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deerflow_extension_api import extension

TABLE = "bufx_rows"


@dataclass
class Buffer:
    run_ids: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def put(self, run_id: str) -> None:
        with self._lock:
            self.run_ids.append(run_id)

    def drain(self) -> list[str]:
        with self._lock:
            out, self.run_ids = self.run_ids, []
            return out


class Lifecycle:
    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        if info.kind == "lead":
            app_store.get_or_init(Buffer, Buffer).put(info.run_id)


class Flusher:
    def __init__(self) -> None:
        self.deps: Any = None

    async def start(self, deps: Any) -> None:
        from sqlalchemy import text

        self.deps = deps
        async with deps.session_factory.begin() as session:
            await session.execute(text(f"CREATE TABLE IF NOT EXISTS {TABLE} (run_id VARCHAR(64) NOT NULL)"))

    async def stop(self) -> None:
        from sqlalchemy import text

        run_ids = self.deps.app_store.get_or_init(Buffer, Buffer).drain()
        if run_ids:
            async with self.deps.session_factory.begin() as session:
                await session.execute(text(f"INSERT INTO {TABLE} (run_id) VALUES (:r)"), [{"r": r} for r in run_ids])


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(Lifecycle())
    registry.service(Flusher())
