"""Batch results over the host's own records: a lead run's subagent delegations (§4.11).

DeerFlow's batches come from its ``batch_task`` tool (a subagent per item, kept durably);
this host has no such tool, but it has the nearest thing: a lead run that delegates with the
``task`` tool runs a subagent per call, and the run journal keeps each call and its result.
So here a **batch** is a run of the reader's user on the thread that delegated at least once
(its id the run id), and its **items** are those delegations in call order: the ``task``
call's description is the item key, the subagent's answer its result. A run without a
journal (``gateway.run_journal``) has no batches.

DeerFlow's reader rules hold: bound to one principal, read-only, detached dictionaries of
DeerFlow's fields only (those without a counterpart here are ``None``), ids non-empty,
stripped and at most 256 characters, ``limit`` 1..100, ``offset`` 0..100000, ``position``
0..99999 (each an exact ``int``, else ``ValueError``), and what the user cannot see is
absent (``[]`` / ``None``). ``read_item`` adds the whole ``result`` (cut at 1,000,000
characters, ``result_truncated``), ``evidence`` (``None``: no knowledge sources here) and a
``revision``, the sha256 of the projection's JSON.
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from ...persistence.models import RunStatus
from ...persistence.records import HostStore

__all__ = ["MAX_RESULT_CHARS", "PREVIEW_CHARS", "HostBatchResultReader"]

MAX_RESULT_CHARS = 1_000_000
PREVIEW_CHARS = 500
_TASK_TOOL = "task"
_FAILED_PREFIX = "Subagent "  # the task tool's text for a subagent that did not complete
_BATCH_STATUS = {
    RunStatus.PENDING.value: "pending",
    RunStatus.RUNNING.value: "running",
    RunStatus.SUCCESS.value: "completed",
    RunStatus.ERROR.value: "failed",
    RunStatus.INTERRUPTED.value: "cancelled",
}
_RUNS_READ = 1000  # the newest runs of a thread a listing looks through
_EVENTS_READ = 2000


def _identifier(value: object) -> str:
    if not isinstance(value, str) or not value or value != value.strip() or len(value) > 256:
        raise ValueError("Invalid resource identity")
    return value


def _integer(value: object, lower: int, upper: int) -> int:
    if type(value) is not int or not lower <= value <= upper:
        raise ValueError("Invalid result window")
    return value


def _iso(at: datetime | None) -> str | None:
    if at is None:
        return None
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).isoformat()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, str | dict)
        )
    return ""


class HostBatchResultReader:
    """``BatchResultReader`` over ``HostStore``'s runs and run journal, bound to ``user_id``."""

    def __init__(self, store: HostStore, *, user_id: str) -> None:
        self._store = store
        self._user_id = _identifier(user_id)

    async def _items(self, thread_id: str, run_id: str) -> list[dict[str, Any]]:
        """A run's delegations, with their whole results (under ``_result``)."""
        items: list[dict[str, Any]] = []
        by_call: dict[str, dict[str, Any]] = {}
        for event in await self._store.run_events(thread_id, run_id, None, _EVENTS_READ):
            content = event.content if isinstance(event.content, dict) else {}
            at = _iso(event.created_at)
            if event.event_type == "llm.ai.response":
                for call in content.get("tool_calls") or ():
                    if not isinstance(call, dict) or call.get("name") != _TASK_TOOL:
                        continue
                    raw = call.get("args")
                    args: dict[str, Any] = raw if isinstance(raw, dict) else {}
                    item: dict[str, Any] = {
                        "id": str(call.get("id") or f"{run_id}:{len(items)}"),
                        "item_key": str(args.get("description") or args.get("prompt") or ""),
                        "position": len(items),
                        "status": "running",
                        "attempt": 1,
                        "error": None,
                        "stop_reason": None,
                        "acceptance_criteria": None,
                        "acceptance_verdict": None,
                        "started_at": at,
                        "completed_at": None,
                        "updated_at": at,
                        "_result": None,
                    }
                    items.append(item)
                    by_call[str(item["id"])] = item
            elif event.event_type == "llm.tool.result":
                found = by_call.get(str(content.get("tool_call_id")))
                if found is None:
                    continue
                text = _text(content.get("content"))
                failed = content.get("status") == "error" or text.startswith(_FAILED_PREFIX)
                found.update(
                    status="failed" if failed else "succeeded",
                    error=text if failed else None,
                    completed_at=at,
                    updated_at=at,
                    _result=None if failed else text,
                )
        return items

    @staticmethod
    def _public(item: dict[str, Any]) -> dict[str, Any]:
        result = item["_result"]
        view = {key: value for key, value in item.items() if key != "_result"}
        view["result_preview"] = result[:PREVIEW_CHARS] if isinstance(result, str) else None
        view["result_truncated"] = isinstance(result, str) and len(result) > PREVIEW_CHARS
        return copy.deepcopy(view)

    async def _run(self, thread_id: str, batch_id: str) -> Any:
        record = await self._store.get_run(thread_id, batch_id)
        return record if record is not None and record.user_id == self._user_id else None

    async def list_batches(self, *, thread_id: str, limit: int = 20) -> list[dict[str, Any]]:
        _identifier(thread_id)
        limit = _integer(limit, 1, 100)
        batches: list[dict[str, Any]] = []
        for record in await self._store.list_runs(thread_id, limit=_RUNS_READ, newest_first=True):
            if record.user_id != self._user_id:
                continue
            items = await self._items(thread_id, record.id)
            if not items:
                continue
            counts = {status: sum(1 for i in items if i["status"] == status) for status in ("succeeded", "failed")}
            counts["running"] = len(items) - counts["succeeded"] - counts["failed"]
            batches.append(
                {
                    "id": record.id,
                    "title": items[0]["item_key"],
                    "subagent_type": "general-purpose",
                    "status": _BATCH_STATUS.get(record.status, record.status),
                    "total_items": len(items),
                    "counts": counts,
                    "created_at": _iso(record.created_at),
                    "updated_at": _iso(record.finished_at or record.started_at or record.created_at),
                    "completed_at": _iso(record.finished_at),
                }
            )
            if len(batches) == limit:
                break
        return batches

    async def list_items(
        self, *, thread_id: str, batch_id: str, offset: int = 0, limit: int = 50
    ) -> list[dict[str, Any]] | None:
        _identifier(thread_id)
        _identifier(batch_id)
        offset, limit = _integer(offset, 0, 100_000), _integer(limit, 1, 100)
        if await self._run(thread_id, batch_id) is None:
            return None
        items = await self._items(thread_id, batch_id)
        if not items:
            return None
        return [self._public(item) for item in items[offset : offset + limit]]

    async def read_item(self, *, thread_id: str, batch_id: str, position: int) -> dict[str, Any] | None:
        _identifier(thread_id)
        _identifier(batch_id)
        position = _integer(position, 0, 99_999)
        if await self._run(thread_id, batch_id) is None:
            return None
        items = await self._items(thread_id, batch_id)
        if position >= len(items):
            return None
        item = items[position]
        projection = self._public(item)
        result = item["_result"]
        projection["result"] = result[:MAX_RESULT_CHARS] if isinstance(result, str) else None
        projection["result_truncated"] = isinstance(result, str) and len(result) > MAX_RESULT_CHARS
        projection["evidence"] = None
        text = json.dumps(projection, sort_keys=True, ensure_ascii=False, default=str)
        projection["revision"] = hashlib.sha256(text.encode()).hexdigest()
        return projection
