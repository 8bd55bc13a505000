"""A thread's checkpoints copied to another thread, whole, by a synchronous saver.

Why synchronous: a copy reads and writes every checkpoint of a thread (a 40-turn thread holds
hundreds, each with the conversation so far), deserialising and serialising each one. Made
through the async saver methods on a loop-first thread (``one_thread``), that work ran on the
event loop itself whenever nothing else was queued: three copies of a 40-turn thread held
every other request for 12 s. One call of this function, handed to the saver's own thread
(``sqlite_saver``), does it all there.

What is copied, as LangGraph's ``copy_thread`` asks: every checkpoint of every namespace,
oldest first so each parent exists before its children, with its pending writes, and the
metadata's ``thread_id`` the target's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CheckpointCopy", "copy_checkpoints", "copy_of"]


@dataclass(frozen=True, slots=True)
class CheckpointCopy:
    """What a saver is asked to write for one checkpoint copied to another thread: one
    ``put`` and a ``put_writes`` per task. The one rule for both the synchronous copy here
    and the async one of savers without ``acopy_thread`` (``agents.thread_state``)."""

    config: dict[str, Any]
    checkpoint: Any
    metadata: dict[str, Any]
    versions: dict[str, Any]
    writes: tuple[tuple[str, list[tuple[str, Any]]], ...]


def copy_of(found: Any, target: str) -> CheckpointCopy:
    """The copy of ``found`` (a ``CheckpointTuple``) under ``target``, with its parent and
    namespace, the metadata's ``thread_id`` the target's, its pending writes by task."""
    configurable = found.config["configurable"]
    parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    into: dict[str, Any] = {"thread_id": target, "checkpoint_ns": configurable.get("checkpoint_ns", "")}
    if parent:
        into["checkpoint_id"] = parent
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in found.pending_writes or ():
        by_task.setdefault(task_id, []).append((channel, value))
    checkpoint = found.checkpoint
    return CheckpointCopy(
        {"configurable": into},
        checkpoint,
        {**(found.metadata or {}), "thread_id": target},
        dict(checkpoint.get("channel_versions", {})),
        tuple(by_task.items()),
    )


def copy_checkpoints(saver: Any, source: str, target: str) -> int:
    """Copy every checkpoint of ``source`` to ``target`` with ``saver``'s synchronous
    ``list``/``put``/``put_writes``; how many were copied."""
    found_all = list(saver.list({"configurable": {"thread_id": source}}))
    for found in reversed(found_all):  # list is newest first; a parent must exist first
        copy = copy_of(found, target)
        written = saver.put(copy.config, copy.checkpoint, copy.metadata, copy.versions)
        for task_id, writes in copy.writes:
            saver.put_writes(written, writes, task_id)
    return len(found_all)
