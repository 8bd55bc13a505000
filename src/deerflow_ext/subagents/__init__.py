"""Subagents: the executor, the ``task`` tool and sandbox leases."""

from __future__ import annotations

from .executor import SubagentBuilder, SubagentExecutor, SubagentResult
from .sandbox import SandboxLease, SandboxPool, sandbox_pool
from .task_tool import make_task_tool

__all__ = [
    "SandboxLease",
    "SandboxPool",
    "SubagentBuilder",
    "SubagentExecutor",
    "SubagentResult",
    "make_task_tool",
    "sandbox_pool",
]
