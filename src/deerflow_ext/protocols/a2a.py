"""``/api/a2a/{assistant_id}``: every assistant as an Agent-to-Agent agent (JSON-RPC).

The official ``a2a-sdk`` parses and answers the JSON-RPC (A2A 1.0's ``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``, and with its 0.3 compatibility
``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``); this module's
request handler maps them onto the Gateway's runs, keeping no task store of its own:

- a task is a run (task id = run id) and a context a thread (context id = thread id); a
  message without a context starts a new thread, which stays, so the context goes on;
- ``message/send`` answers once the run ended, ``message/stream`` streams the run's
  ``updates`` as ``working`` status updates carrying each AI message, then the answer as an
  artifact and the final status; a stream the client drops leaves the run going;
- ``tasks/get`` reads the run's row (any Gateway process); ``tasks/cancel`` cancels the run
  and answers once it ended (``canceled``; its thread is free again); with ``auth`` both
  find only the caller's tasks (their thread's ``threads.read``/``update`` filter), another
  user's task answering task-not-found as its run would answer 404;
- a run that pauses on an interrupt (a human-in-the-loop extension) is ``input-required``;
  the next message naming that task resumes the thread with its text (or its data part) as
  the resume value, as a new run, so a new task id.

Not served: push notifications, ``tasks/list``, re-subscribing to a task, the extended
card, file parts. The agent card (``/api/.well-known/agent-card.json?assistant_id=``) is
built from the assistant's name and description.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped]
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..persistence.assistants import AssistantStore
from ..persistence.models import RunStatus, ThreadStatus
from ..persistence.records.values import RunRecord
from .runs import RunCall, RunRefused, ServedRuns, StartedRun, answer_text, node_updates

__all__ = ["A2aEndpoint"]

logger = logging.getLogger("deerflow_ext.protocols")

_STREAM_MODES = ("updates", "values")
_MOST_RUNS = 10_000


def _text_of(message: Message) -> str:
    return "\n".join(part.text for part in message.parts if part.HasField("text"))


def _resume_value(message: Message) -> Any:
    """A follow-up's answer to the interrupt: its data part when it has one (a decision
    object, as a HITL middleware expects), else its text."""
    for part in message.parts:
        if part.HasField("data"):
            return MessageToDict(part.data)
    return _text_of(message)


def _data_part(data: Mapping[str, Any]) -> Part:
    value = Value()
    value.struct_value.update(data)
    return Part(data=value)


def _agent_message(text: str, run_id: str, thread_id: str) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
        task_id=run_id,
        context_id=thread_id,
    )


def _refused(exc: RunRefused) -> Exception:
    if exc.status == 404:
        return InvalidParamsError(message=exc.message)
    if exc.status in (409, 422):
        return InvalidParamsError(message=exc.message)
    return UnsupportedOperationError(message=exc.message)


class _Handler(RequestHandler):
    def __init__(self, runs: ServedRuns) -> None:
        self._runs = runs

    # -- the run a message starts --------------------------------------------------------
    async def _start(
        self, params: SendMessageRequest, context: ServerCallContext, modes: tuple[str, ...]
    ) -> StartedRun:
        assistant_id = str(context.state["assistant_id"])
        message = params.message
        thread_id = message.context_id or str(uuid.uuid4())
        resumes = False
        if message.task_id:
            record = await self._record(message.task_id)
            if record.thread_id != thread_id and message.context_id:
                raise InvalidParamsError(message=f"task {message.task_id} is not in context {message.context_id}")
            thread_id = record.thread_id
            resumes = bool(await self._input_required(record))
            if not resumes:
                raise InvalidParamsError(
                    message=f"task {message.task_id} is {record.status}; only an input-required task takes a follow-up"
                )
        call = RunCall(
            assistant_id=assistant_id,
            messages=() if resumes else ({"role": "user", "content": _text_of(message)},),
            thread_id=thread_id,
            resume=_resume_value(message) if resumes else None,
            resumes=resumes,
            stream_modes=modes,
            metadata={"a2a_message_id": message.message_id} if message.message_id else None,
        )
        try:
            return await self._runs.start(call)
        except RunRefused as exc:
            raise _refused(exc) from None

    async def _record(self, task_id: str, action: str = "read") -> RunRecord:
        """The task's run as the caller may ``action`` it; another user's task (``auth``) is
        not found, as the run routes answer another user's run 404."""
        try:
            record = await self._runs.visible_run(task_id, action)
        except RunRefused as exc:
            raise _refused(exc) from None
        if record is None:
            raise TaskNotFoundError(message=f"task {task_id} not found")
        return record

    async def _input_required(self, record: RunRecord) -> tuple[Any, ...]:
        """What a run that ended by pausing its thread on an interrupt asks (the interrupts'
        values), when it is the thread's latest run; empty otherwise (a pause and a cancel
        both end a run ``interrupted``: the thread tells them apart)."""
        if record.status != RunStatus.INTERRUPTED.value:
            return ()
        store = self._runs.serving().store
        thread = await store.get_thread(record.thread_id)
        if thread is None or thread.status != ThreadStatus.INTERRUPTED.value:
            return ()
        runs = await store.list_runs(record.thread_id, limit=_MOST_RUNS, offset=0)  # oldest first
        if not runs or runs[-1].id != record.id:
            return ()
        return await self._runs.pending_interrupts(record.thread_id)

    async def _task(self, record: RunRecord, answer: str | None = None) -> Task:
        state = {
            RunStatus.PENDING.value: TaskState.TASK_STATE_SUBMITTED,
            RunStatus.RUNNING.value: TaskState.TASK_STATE_WORKING,
            RunStatus.SUCCESS.value: TaskState.TASK_STATE_COMPLETED,
            RunStatus.ERROR.value: TaskState.TASK_STATE_FAILED,
            RunStatus.INTERRUPTED.value: TaskState.TASK_STATE_CANCELED,
        }.get(record.status, TaskState.TASK_STATE_FAILED)
        asks = await self._input_required(record) if state == TaskState.TASK_STATE_CANCELED else ()
        if asks:
            state = TaskState.TASK_STATE_INPUT_REQUIRED
        text = answer if answer is not None else record.answer
        status = TaskStatus(state=state)
        task = Task(id=record.id, context_id=record.thread_id)
        if state == TaskState.TASK_STATE_FAILED and record.error:
            status.message.CopyFrom(_agent_message(record.error, record.id, record.thread_id))
        elif state == TaskState.TASK_STATE_INPUT_REQUIRED:
            # What the graph asks, as data (a HITL middleware's action requests), to answer
            # with a follow-up naming this task.
            question = _agent_message(text or "The agent needs your answer to go on.", record.id, record.thread_id)
            question.parts.append(_data_part({"interrupts": list(asks)}))
            status.message.CopyFrom(question)
        elif text and state == TaskState.TASK_STATE_COMPLETED:
            task.artifacts.append(Artifact(artifact_id=f"{record.id}-answer", name="answer", parts=[Part(text=text)]))
        task.status.CopyFrom(status)
        return task

    async def _ended(self, started: StartedRun) -> Task:
        await started.handle.wait()
        values = await self._runs.final_values(started)
        record = await self._record(started.run_id)
        return await self._task(record, answer_text(values))

    # -- the JSON-RPC methods ----------------------------------------------------------
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        started = await self._start(params, context, ())
        try:
            return await self._ended(started)
        except BaseException:
            if not started.handle.finished.is_set():  # the caller went away: so does the run
                self._runs.serving().runs.cancel_soon(started.run_id)
            raise

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        started = await self._start(params, context, _STREAM_MODES)
        run_id, thread_id = started.run_id, started.thread_id
        yield Task(id=run_id, context_id=thread_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        async for text in self._said(started):
            yield TaskStatusUpdateEvent(
                task_id=run_id,
                context_id=thread_id,
                status=TaskStatus(state=TaskState.TASK_STATE_WORKING, message=_agent_message(text, run_id, thread_id)),
            )
        task = await self._ended(started)
        for artifact in task.artifacts:
            yield TaskArtifactUpdateEvent(task_id=run_id, context_id=thread_id, artifact=artifact, last_chunk=True)
        yield TaskStatusUpdateEvent(task_id=run_id, context_id=thread_id, status=task.status)

    async def _said(self, started: StartedRun) -> AsyncIterator[str]:
        """The text of each AI message the run's ``updates`` carry, as they come."""
        async for updates in node_updates(self._runs, started.run_id):
            for update in updates.values():
                messages = update.get("messages") if isinstance(update, Mapping) else None
                text = answer_text({"messages": messages}) if isinstance(messages, list) else None
                if text:
                    yield text

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return await self._task(await self._record(params.id))

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        record = await self._record(params.id, "update")
        runs = self._runs.serving().runs
        await runs.request_cancel(record.id, record.status)
        await runs.wait_done(record.thread_id, record.id)
        return await self._task(await self._record(params.id))

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        raise UnsupportedOperationError(message="tasks/list is not served; tasks/get reads one task")

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise UnsupportedOperationError(message="push notifications are not served")

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise UnsupportedOperationError(message="push notifications are not served")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise UnsupportedOperationError(message="push notifications are not served")

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise UnsupportedOperationError(message="push notifications are not served")

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        raise UnsupportedOperationError(message="re-subscribing to a task is not served")
        yield  # an async generator, as the SDK expects

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(message="there is no extended agent card")


class _AssistantContext(DefaultServerCallContextBuilder):
    """The SDK's call context, with the assistant the path names."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["assistant_id"] = request.path_params["assistant_id"]
        return context


class A2aEndpoint:
    """The JSON-RPC endpoint (:meth:`rpc`, at ``/api/a2a/{assistant_id}``) and the agent
    card (:meth:`card`, at ``/api/.well-known/agent-card.json``) the Gateway mounts."""

    def __init__(self, runs: ServedRuns, *, version: str) -> None:
        self._runs = runs
        self._version = version
        self._dispatcher = JsonRpcDispatcher(
            request_handler=_Handler(runs), context_builder=_AssistantContext(), enable_v0_3_compat=True
        )

    async def rpc(self, request: Request) -> Response:
        if await self._assistant(request.path_params["assistant_id"]) is None:
            return JSONResponse({"detail": f"assistant {request.path_params['assistant_id']} not found"}, 404)
        return await self._dispatcher.handle_requests(request)

    async def _assistant(self, assistant_id: str) -> Mapping[str, Any] | None:
        try:
            engine = self._runs.serving().engine
        except RunRefused:
            return None
        record = await AssistantStore(engine).get(assistant_id)
        if record is None:
            return None
        return {"assistant_id": record.assistant_id, "name": record.name, "description": record.description}

    async def card(self, request: Request) -> Response:
        assistant_id = request.query_params.get("assistant_id")
        if not assistant_id:
            return JSONResponse({"detail": "assistant_id: the query parameter naming the assistant is required"}, 400)
        try:
            self._runs.serving()
        except RunRefused as exc:
            return JSONResponse({"detail": exc.message}, exc.status)
        assistant = await self._assistant(assistant_id)
        if assistant is None:
            return JSONResponse({"detail": f"assistant {assistant_id} not found"}, 404)
        url = f"{str(request.base_url).rstrip('/')}/api/a2a/{assistant_id}"
        name = str(assistant["name"] or assistant_id)
        description = str(assistant["description"] or f"The deerflow-ext assistant {name}.")
        card = AgentCard(
            name=name,
            description=description,
            version=self._version,
            supported_interfaces=[
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
            ],
            capabilities=AgentCapabilities(streaming=True, push_notifications=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id=assistant_id, name=name, description=description, tags=["chat"])],
        )
        return JSONResponse(agent_card_to_dict(card))
