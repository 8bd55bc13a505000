"""Agent runs an extension starts through the host, as the calling user (DeerFlow's
``AgentRuns``, digest §4.10).

A handle is bound when an action is admitted, to the action's principal, and goes through
the same admission as the run routes (``routes.runs.start_run``): the run is recorded for
that principal, hooked, journaled and streamed like any other. Internal callers get no
handle, as in DeerFlow. Every call re-checks what it touches:

- a thread the handle creates records its owner in its metadata (``owner``: the key
  LangGraph's auth tutorial filters on); a thread with another owner answers 404, as an
  absent one does, and a thread with none belongs to the Gateway's default principal;
- with ``auth`` configured the handle goes through the user's ``@auth.on`` handlers instead,
  exactly as the routes do (``gateway.scoping``): ``threads.create`` stamps a thread it
  creates, ``threads.read`` filters the threads it may touch (another user's is 404),
  ``threads.create_run`` admits each run (``routes.runs.owned_run``). The ``owner`` key is
  then neither written nor read: the handlers are the one rule for users' threads, so a
  thread the user made over HTTP and one an extension made for them are seen alike;
- ``input`` holds ``messages`` and nothing a client could not send; a ``system`` message is
  refused (400), and so is a ``context`` that names a host key (422);
- an active run on the thread is a conflict (409), never interrupted: the handle starts
  runs with ``multitask_strategy: reject``;
- an ``idempotency_key`` already used by this user on this thread returns that run
  (process-local: the key is remembered while this process runs);
- ``wait`` gives up with ``TimeoutError`` without cancelling; ``cancel`` interrupts and
  keeps the thread's checkpoints.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException
from pydantic import ValidationError

from deerflow_extension_api import AgentRun, AgentRunError, ExtensionPrincipal

from ...identity import AuthenticatedUser, IdentityGate
from ...persistence.models import DEFAULT_USER_ID, LIVE_RUN_STATUSES, RunStatus
from ...persistence.records import ThreadNotFoundError
from ...runtime.wire import jsonable
from ..routes.runs import owned_run, start_run
from ..schemas import RunCreate
from ..state import GatewayRuntime

__all__ = ["OWNER_METADATA_KEY", "GatewayAgentRuns"]

OWNER_METADATA_KEY = "owner"
_HOST_CONTEXT_KEYS = frozenset({"thread_id", "run_id", "task_id", "agent_name", "user_id"})
_LIVE = frozenset(status.value for status in LIVE_RUN_STATUSES)
_POLL_SECONDS = 0.05
_MAX_KEYS = 10_000


class GatewayAgentRuns:
    """``AgentRuns`` bound to one principal on one Gateway runtime."""

    def __init__(
        self,
        runtime: GatewayRuntime,
        principal: ExtensionPrincipal,
        *,
        namespace: str | None = None,
        keys: dict[tuple[str, str, str], str] | None = None,
        identity: tuple[IdentityGate, AuthenticatedUser] | None = None,
    ) -> None:
        """``identity``: with ``auth``, the gate and the principal's authenticated user,
        whose handlers scope every thread the handle touches."""
        self._runtime = runtime
        self._principal = principal
        self._namespace = namespace
        self._keys = keys if keys is not None else {}
        self._identity = identity

    def for_plugin(self, namespace: str) -> GatewayAgentRuns:
        """The same handle, its runs marked as this plugin's (run metadata ``plugin``)."""
        return GatewayAgentRuns(
            self._runtime, self._principal, namespace=namespace, keys=self._keys, identity=self._identity
        )

    async def _authorize(self, action: str, value: dict[str, Any]) -> Any:
        """The user's ``threads.<action>`` filter (``auth``); a handler's refusal as the
        handle's error."""
        assert self._identity is not None
        gate, user = self._identity
        try:
            return await gate.authorize(user, "threads", action, value)
        except HTTPException as exc:
            raise AgentRunError(exc.status_code, str(exc.detail)) from None

    @property
    def _user(self) -> str:
        return self._principal.user_id

    async def _owned(self, thread_id: str) -> None:
        if not isinstance(thread_id, str) or not thread_id:
            raise AgentRunError(422, "thread_id must be a non-empty string")
        if self._identity is not None:  # the user's threads.read handler, as the routes'
            filters = await self._authorize("read", {"thread_id": thread_id})
            if await self._runtime.store.get_thread(thread_id, filters) is None:
                raise AgentRunError(404, f"thread {thread_id} not found")
            return
        record = await self._runtime.store.get_thread(thread_id)
        owner = record.metadata.get(OWNER_METADATA_KEY, DEFAULT_USER_ID) if record is not None else None
        if owner != self._user:
            raise AgentRunError(404, f"thread {thread_id} not found")

    async def create_thread(
        self,
        *,
        assistant_id: str = "lead_agent",
        thread_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        if thread_id is not None:
            existing = await self._runtime.store.get_thread(thread_id)
            if existing is not None:
                await self._owned(thread_id)  # another's thread: 404, as if absent
                return thread_id
        if self._identity is not None:  # the user's threads.create handler stamps it, as the route's
            value: dict[str, Any] = {
                "thread_id": thread_id,
                "metadata": {**dict(metadata or {}), "assistant_id": assistant_id},
                "if_exists": "do_nothing",
            }
            await self._authorize("create", value)
            fields = dict(value.get("metadata") or {})
        else:
            fields = {**dict(metadata or {}), OWNER_METADATA_KEY: self._user, "assistant_id": assistant_id}
        record = await self._runtime.store.create_thread(fields, thread_id=thread_id)
        return record.id

    async def _start(self, thread_id: str, body: dict[str, Any], idempotency_key: str | None) -> AgentRun:
        await self._owned(thread_id)
        key = (self._user, thread_id, idempotency_key) if idempotency_key is not None else None
        if key is not None and key in self._keys:
            return await self.get(thread_id=thread_id, run_id=self._keys[key])
        if self._namespace is not None:
            body["metadata"] = {**body.get("metadata", {}), "plugin": self._namespace}
        try:
            request = RunCreate.model_validate({**body, "multitask_strategy": "reject"})
        except ValidationError as exc:
            raise AgentRunError(422, f"invalid run input: {exc.errors()[0].get('msg', 'invalid')}") from None
        try:
            owned = None
            if self._identity is not None:  # the user's threads.create_run handler, as the routes'
                gate, user = self._identity
                request, owned = await owned_run(gate, user, self._runtime, thread_id, request, False)
            handle = await start_run(self._runtime, thread_id, request, user_id=self._user, owner_metadata=owned)
        except HTTPException as exc:
            raise AgentRunError(exc.status_code, str(exc.detail)) from None
        except ThreadNotFoundError:
            raise AgentRunError(404, f"thread {thread_id} not found") from None
        if key is not None:
            if len(self._keys) >= _MAX_KEYS:
                self._keys.pop(next(iter(self._keys)))
            self._keys[key] = handle.run_id
        return AgentRun(
            thread_id, handle.run_id, RunStatus.PENDING.value, str(body.get("assistant_id") or "lead_agent")
        )

    async def start(
        self,
        *,
        thread_id: str,
        input: Mapping[str, Any],
        context: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> AgentRun:
        if not isinstance(input, Mapping):
            raise AgentRunError(422, "input must be a mapping with messages")
        messages = input.get("messages")
        if not isinstance(messages, list | tuple) or not messages:
            raise AgentRunError(422, "input needs at least one message")
        for message in messages:
            kind = message.get("role") or message.get("type") if isinstance(message, Mapping) else None
            if kind == "system":
                raise AgentRunError(400, "system messages are the host's; an extension cannot send one")
        named = _HOST_CONTEXT_KEYS.intersection(context or {})
        if named:
            raise AgentRunError(422, f"context may not set host keys: {', '.join(sorted(named))}")
        body = {"input": {"messages": [dict(m) for m in messages]}, "context": dict(context or {})}
        return await self._start(thread_id, body, idempotency_key)

    async def resume(self, *, thread_id: str, resume: Any, idempotency_key: str | None = None) -> AgentRun:
        return await self._start(thread_id, {"command": {"resume": resume}}, idempotency_key)

    async def get(self, *, thread_id: str, run_id: str) -> AgentRun:
        await self._owned(thread_id)
        record = await self._runtime.store.get_run(thread_id, run_id)
        if record is None or record.user_id != self._user:
            raise AgentRunError(404, f"run {run_id} not found on thread {thread_id}")
        assistant = record.input.get("assistant_id")
        return AgentRun(thread_id, run_id, record.status, str(assistant) if assistant else None)

    async def get_state(self, *, thread_id: str) -> dict[str, Any]:
        await self._owned(thread_id)
        states = getattr(self._runtime.agent_host, "thread_states", None)
        snapshot = await states.get(thread_id) if states is not None else None
        if snapshot is None:
            return {"values": {}, "next": []}
        return {"values": jsonable(snapshot.values), "next": list(snapshot.next)}

    async def wait(self, *, thread_id: str, run_id: str, timeout: float = 60) -> AgentRun:  # noqa: ASYNC109
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout):
            raise AgentRunError(422, "timeout must be a finite number of seconds")
        run = await self.get(thread_id=thread_id, run_id=run_id)
        async with asyncio.timeout(max(float(timeout), 0.0)):
            while run.status in _LIVE:
                local = self._runtime.runs.get(run_id)
                if local is not None and not local.finished.is_set():
                    await local.finished.wait()
                else:  # elsewhere, or ended here with its row still being saved: poll
                    await asyncio.sleep(_POLL_SECONDS)
                run = await self.get(thread_id=thread_id, run_id=run_id)
        return run

    async def cancel(self, *, thread_id: str, run_id: str) -> None:
        run = await self.get(thread_id=thread_id, run_id=run_id)
        await self._runtime.runs.request_cancel(run_id, run.status)
