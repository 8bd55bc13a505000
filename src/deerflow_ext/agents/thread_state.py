"""A thread's state and history, read and written through the lead graph.

LangGraph's own state API (``aget_state``, ``aget_state_history``, ``aupdate_state``) is the
only reader that knows what a checkpoint means: which channels are state, which nodes run
next, which writes are pending. It needs a compiled graph, so the host keeps one lead graph
per process for it, built on first use under the process's extensions: extensions see that
one construction (contributors are asked for middleware, assembly observers get a
descriptor) although no run follows it. The graph only reads and writes checkpoints here;
none of its nodes run.

Rollback (LangGraph's ``multitask_strategy="rollback"`` and cancel ``action="rollback"``)
restores the thread to the newest checkpoint another run wrote, as a new checkpoint on top
(``as_node="__copy__"``): the rolled-back run's checkpoints stay in the history, as every
fork does, and its record stays ``interrupted``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from ..persistence.checkpoint_copy import copy_of

__all__ = ["ThreadStates"]


def _config(thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


class ThreadStates:
    """State access for the Gateway's thread routes; ``build_graph`` makes the lead graph."""

    def __init__(self, build_graph: Callable[[], Any], checkpointer: Any) -> None:
        self._build_graph = build_graph
        self._graph: Any = None
        self._lock = asyncio.Lock()
        self.checkpointer = checkpointer

    async def graph(self) -> Any:
        async with self._lock:
            if self._graph is None:
                self._graph = self._build_graph()
            return self._graph

    async def get(self, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> Any | None:
        """The thread's ``StateSnapshot`` (at ``checkpoint_id``, else the latest); None when
        the thread has no checkpoint (yet)."""
        if self.checkpointer is None:
            return None
        graph = await self.graph()
        snapshot = await graph.aget_state(_config(thread_id, checkpoint_id, checkpoint_ns))
        return snapshot if snapshot.config else None

    async def history(
        self,
        thread_id: str,
        *,
        limit: int,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        checkpoint_ns: str = "",
    ) -> list[Any]:
        """The thread's snapshots, newest first."""
        if self.checkpointer is None:
            return []
        graph = await self.graph()
        return [
            snapshot
            async for snapshot in graph.aget_state_history(
                _config(thread_id, checkpoint_ns=checkpoint_ns),
                filter=dict(metadata) if metadata else None,
                before=_config(thread_id, before, checkpoint_ns) if before else None,
                limit=limit,
            )
        ]

    async def update(
        self, thread_id: str, values: Any, *, as_node: str | None = None, checkpoint_id: str | None = None
    ) -> dict[str, Any]:
        """Write ``values`` as node ``as_node`` would; returns the new checkpoint's config."""
        if self.checkpointer is None:
            raise LookupError("this Gateway keeps no checkpoints")
        graph = await self.graph()
        config = await graph.aupdate_state(_config(thread_id, checkpoint_id), values, as_node=as_node)
        return dict(config.get("configurable", {}))

    async def restore_before_run(self, thread_id: str, run_id: str) -> bool:
        """Make the newest checkpoint not written by ``run_id`` the thread's state again.

        True when something changed. A run that wrote nothing leaves the thread alone; a
        thread whose only checkpoints are the run's is emptied.
        """
        if self.checkpointer is None:
            return False
        graph = await self.graph()
        history = graph.aget_state_history(_config(thread_id))
        newest = None
        async for snapshot in history:
            newest = newest or snapshot
            if (snapshot.metadata or {}).get("run_id") != run_id:
                if snapshot is newest:
                    return False
                await graph.aupdate_state(snapshot.config, None, as_node="__copy__")
                return True
        if newest is None:
            return False
        await self.checkpointer.adelete_thread(thread_id)
        return True

    async def copy(self, source: str, target: str) -> None:
        """Copy every checkpoint of ``source`` (each namespace, oldest first, pending writes
        included) to ``target``, parents kept, so ``target`` has the same state and history.

        A saver that implements LangGraph's ``acopy_thread`` copies it whole (the SQLite
        saver: on its thread, off the event loop; ``persistence.checkpoint_copy``); for any
        other, ``alist``/``aput``/``aput_writes`` are the saver API every checkpointer has.
        """
        if self.checkpointer is None:
            return
        saver = self.checkpointer
        try:
            await saver.acopy_thread(source, target)
            return
        except NotImplementedError:
            pass
        tuples = [t async for t in saver.alist({"configurable": {"thread_id": source}})]
        for found in reversed(tuples):  # alist is newest first; a parent must exist first
            copy = copy_of(found, target)
            written = await saver.aput(copy.config, copy.checkpoint, copy.metadata, copy.versions)
            for task_id, writes in copy.writes:
                await saver.aput_writes(written, writes, task_id)

    async def delete(self, thread_id: str) -> None:
        if self.checkpointer is not None:
            await self.checkpointer.adelete_thread(thread_id)
