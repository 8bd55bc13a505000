"""One extension, installed twice with different ``config: {tag: ...}`` in two Gateway apps of
one process (``test_two_apps.py``). Everything it sees is recorded with its tag, so the test
can tell which app's instance saw which run.

A module of its own, importing no ``conftest``: the loader imports it as
``gateway.two_apps_ext``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import AgentScope, ExtensionData, MiddlewarePlacement, Placement

SEEN: list[tuple[str, str, str]] = []  # (tag of the instance, what, marker of the app whose run it was)
MARKER = re.compile(r"\b([ab])-\d+\b")


def marker(text: Any) -> str:
    """The ``a-3``/``b-7`` marker a test prompt carries (``""`` when it has none)."""
    found = MARKER.search(str(text))
    return found.group(0) if found else ""


class Runs:
    count = 0


class Lifecycle:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    async def on_task_start(self, app_store: ExtensionData, task_store: Any, info: Any) -> None:
        app_store.get_or_init(Runs, Runs).count += 1
        SEEN.append((self.tag, f"start:{info.kind}", info.run_id))

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        SEEN.append((self.tag, f"stop:{info.kind}", info.run_id))


class Tagged(AgentMiddleware):  # type: ignore[type-arg]
    """Notes the marker of every model call it sees; fails on prompts saying FAIL."""

    def __init__(self, tag: str, scope: str) -> None:
        super().__init__()
        self.tag, self.scope = tag, scope

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        messages = state.get("messages", [])
        text = " ".join(str(getattr(m, "content", m)) for m in messages)
        SEEN.append((self.tag, f"model:{self.scope}", marker(text)))
        if "FAIL" in text:
            raise RuntimeError(f"boom from {self.tag}")


class Contributor:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        scope = "lead" if ctx.scope is AgentScope.LEAD else "subagent"
        SEEN.append((self.tag, f"contribute:{scope}", ""))
        return [MiddlewarePlacement(Tagged(self.tag, scope), Placement.STANDARD)]


def _router(tag: str) -> APIRouter:
    router = APIRouter(prefix=f"/api/ext/two-apps-{tag}")

    @router.get("/runs")
    async def runs() -> dict[str, Any]:
        return {"tag": tag}

    return router


def install(registry: Any, config: Mapping[str, Any]) -> None:
    tag = str(config["tag"])
    registry.task_lifecycle(Lifecycle(tag))
    registry.middlewares(Contributor(tag))
    registry.routers([_router(tag)])
