"""The Gateway's runs as the agent protocols (``protocols/``) start and answer them.

A protocol's run is built as the JSON body of a run route would be, checked by the same
door (``first_problem``) and model (``RunCreate``), and started, answered and released by
the run routes' own functions (``start_run``, ``start_stateless``, ``final_values``,
``forget_after``): there is one way to run an assistant, whichever door the request came in
by. An ``HTTPException`` those raise becomes :class:`~..protocols.runs.RunRefused` with the
same status and line. With ``auth`` configured the run is the protocol request's user's, as a
run route's would be (``threads.create_run`` handler, the thread visible to them, the
user recorded), the user read from ``identity.REQUEST_USER``: the protocols hand no request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import ValidationError

from ..identity import REQUEST_USER
from ..persistence.models import DEFAULT_USER_ID
from ..persistence.records.values import RunRecord
from ..protocols.runs import RunCall, RunRefused, StartedRun
from ..runtime.stream_modes import WAIT_STREAM_MODES
from ..runtime.wire import jsonable
from .door import first_problem
from .routes.runs import final_values, owned_run, start_run
from .routes.stateless import forget_after, start_stateless
from .schemas import RunCreate
from .state import GatewayRuntime

__all__ = ["GatewayServedRuns"]

_FORGOTTEN = RunCreate.model_construct()  # on_completion unset: a stateless run's thread is deleted once it ended


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "body"
    return f"{where}: {error['msg']}"


class GatewayServedRuns:
    """:class:`~..protocols.runs.ServedRuns` over one Gateway app."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app

    def serving(self) -> GatewayRuntime:
        runtime: GatewayRuntime | None = getattr(self._app.state, "runtime", None)
        if runtime is None:
            raise RunRefused(503, "the Gateway is not serving (starting up or shutting down)")
        return runtime

    def _body(self, call: RunCall) -> RunCreate:
        document: dict[str, Any] = {"assistant_id": call.assistant_id}
        if call.resumes:
            document["command"] = {"resume": call.resume}
        else:
            document["input"] = {"messages": [dict(m) for m in call.messages]}
        if call.thread_id is not None:
            document["if_not_exists"] = "create"
        if call.metadata:
            document["metadata"] = dict(call.metadata)
        if call.stream_modes:
            document["stream_mode"] = list(call.stream_modes)
        problem = first_problem(document, self._app.state.config.gateway.limits)
        if problem is not None:
            raise RunRefused(422, problem)
        try:
            return RunCreate.model_validate(document)
        except ValidationError as exc:
            raise RunRefused(422, _one_line(exc)) from None

    async def start(self, call: RunCall) -> StartedRun:
        runtime = self.serving()
        body = self._body(call)
        modes = call.stream_modes or WAIT_STREAM_MODES
        user = REQUEST_USER.get()  # with ``auth``: the protocol request's user, as a run route's
        # The run routes' owner rule (``scoping.run_owner``) without a request: the user with
        # ``auth``, else the Gateway's one principal.
        owner = user.identity if user is not None else DEFAULT_USER_ID
        owned: dict[str, Any] | None = None
        try:
            if user is not None:
                gate = self._app.state.identity
                body, owned = await owned_run(gate, user, runtime, call.thread_id or "", body, call.thread_id is None)
            if call.thread_id is None:
                thread_id, handle = await start_stateless(runtime, body, modes, user_id=owner, owner_metadata=owned)
            else:
                handle = await start_run(runtime, call.thread_id, body, modes, user_id=owner, owner_metadata=owned)
                thread_id = call.thread_id
        except HTTPException as exc:
            raise RunRefused(exc.status_code, str(exc.detail)) from None
        return StartedRun(thread_id, handle.run_id, handle, stateless=call.thread_id is None)

    async def final_values(self, run: StartedRun) -> Mapping[str, Any]:
        values: Mapping[str, Any] = await final_values(
            self.serving(), run.thread_id, run.run_id, run.handle.final_values
        )
        return values

    def release(self, run: StartedRun) -> None:
        if run.stateless:
            forget_after(self.serving(), run.thread_id, run.handle, _FORGOTTEN)

    async def visible_run(self, run_id: str, action: str) -> RunRecord | None:
        runtime = self.serving()
        record = await runtime.store.find_run(run_id)
        user = REQUEST_USER.get()
        if record is None or user is None:
            return record
        # The run routes' scope (``scoping.visible_thread``): the thread's ``threads.<action>``
        # filter, applied in SQL to the run's thread; another user's run is not found.
        value: dict[str, Any] = {"thread_id": record.thread_id, "run_id": run_id}
        if action == "update":
            value["action"] = "interrupt"
        try:
            filters = await self._app.state.identity.authorize(user, "threads", action, value)
        except HTTPException as exc:
            raise RunRefused(exc.status_code, str(exc.detail)) from None
        if filters and await runtime.store.get_thread(record.thread_id, filters) is None:
            return None
        return record

    async def pending_interrupts(self, thread_id: str) -> tuple[Any, ...]:
        states = getattr(self.serving().agent_host, "thread_states", None)
        snapshot = await states.get(thread_id) if states is not None else None
        if snapshot is None:
            return ()
        pending = tuple(getattr(snapshot, "interrupts", ())) or tuple(i for t in snapshot.tasks for i in t.interrupts)
        return tuple(jsonable(getattr(interrupt, "value", None)) for interrupt in pending)
