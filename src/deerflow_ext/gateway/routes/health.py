"""Liveness and server info: answer as soon as the process serves HTTP.

``/health`` is the Gateway's own; ``/ok`` and ``/api/info`` are what LangGraph Platform
clients probe (LangChain's agent-chat-ui checks ``/info`` under its API URL before it
starts a conversation).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter

__all__ = ["package_version", "router"]

router = APIRouter(tags=["health"])


def package_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ok")
@router.get("/api/ok", include_in_schema=False)
async def ok() -> dict[str, bool]:
    return {"ok": True}


@router.get("/api/info")
async def info() -> dict[str, Any]:
    return {
        "version": package_version("deerflow-ext"),
        "langgraph_py_version": package_version("langgraph"),
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "host": {"kind": "deerflow-ext"},
    }
