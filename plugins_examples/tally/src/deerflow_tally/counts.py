"""The numbers the extension keeps: one ``TaskCounts`` per task, one ``Tally`` per process.

A task's tool calls are counted in its own store while it runs, from whichever thread the
tool call happens on, and folded into the process tally once, when the task stops, together
with its outcome. System model calls have no task of their own to wait for (memory runs
detached, after the run), so they go straight to the tally.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from deerflow_extension_api import SystemOperationKind, TaskOutcome

__all__ = ["Tally", "TaskCounts"]


class TaskCounts:
    """Tool calls of one task, by tool name; lives in that task's store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: Counter[str] = Counter()

    def tool_called(self, name: str) -> None:
        with self._lock:
            self._tools[name] += 1

    def by_tool(self) -> dict[str, int]:
        with self._lock:
            return dict(self._tools)


class Tally:
    """Process-wide totals; lives in the app store and is what ``/stats`` reports.

    Every outcome and every system operation kind is reported, at zero until it happens, so
    a reader never has to guess whether a missing key means "none" or "not supported".
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: Counter[tuple[str, str]] = Counter()
        self._tools: Counter[str] = Counter()
        self._system: dict[str, Counter[str]] = {kind.value: Counter() for kind in SystemOperationKind}

    def task_stopped(self, kind: str, outcome: TaskOutcome, tools: dict[str, int]) -> None:
        with self._lock:
            self._outcomes[(kind, outcome.value)] += 1
            self._tools.update(tools)

    def system_call(self, kind: SystemOperationKind, *, failed: bool) -> None:
        with self._lock:
            counts = self._system.setdefault(kind.value, Counter())
            counts["calls"] += 1
            counts["errors"] += int(failed)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            outcomes = {o.value: 0 for o in TaskOutcome}
            by_kind: dict[str, dict[str, int]] = {}
            for (kind, outcome), n in self._outcomes.items():
                outcomes[outcome] += n
                by_kind.setdefault(kind, {o.value: 0 for o in TaskOutcome})[outcome] += n
            return {
                "tasks": outcomes,
                "tasks_by_kind": by_kind,
                "tool_calls": sum(self._tools.values()),
                "tool_calls_by_name": dict(self._tools),
                "system_model_calls": {
                    kind: {"calls": c["calls"], "errors": c["errors"]} for kind, c in self._system.items()
                },
            }
