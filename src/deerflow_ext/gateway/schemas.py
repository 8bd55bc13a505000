"""Request and response bodies of the LangGraph Platform API the Gateway serves.

Shapes follow what ``langgraph_sdk`` and ``@langchain/langgraph-sdk`` send and parse.
Request models forbid keys neither LangGraph nor the Gateway knows: a misspelt ``gaol``
would otherwise run without the goal the client meant to set, and the client would never
learn why. Every run option LangGraph defines *is* accepted; the ones the Gateway has no
equivalent for are ignored, and say so in their description (``/docs``):

* ``feedback_keys``, ``langsmith_tracer``, ``on_completion`` on a thread's run
  (a stateless run honours it), ``checkpoint_during``, ``strict_resume``, ``stream_resumable``
  (every run's stream is resumable);
* stream modes ``tools`` and ``lifecycle`` (no events: see ``stream_modes``).

A run pauses where the graph says so — ``interrupt_before`` / ``interrupt_after`` name graph
nodes (``"*"`` every node), and a node, tool or contributed middleware may call LangGraph's
``interrupt()`` — and a later run resumes it with ``command`` (``resume``, ``update``,
``goto``), as LangGraph does.

Messages come in LangGraph's shapes: ``type`` (human, ai, system, tool) or ``role`` (user,
assistant, system, tool), an optional ``id``, content as a string or a list of content
blocks; other message keys (``name``, ``tool_call_id``, ``additional_kwargs``...) pass
through to LangChain.

Responses carry LangGraph's fields plus the Gateway's own: a run's ``outcome``, ``answer``,
``error`` and ``token_usage``, a thread's ``title``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from langchain_core.messages import convert_to_messages
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from ..config.ttl import MAX_TTL_MINUTES
from ..persistence.json_match import MAX_FILTER_KEYS, check_filter_keys
from ..persistence.records import RunRecord, ThreadRecord
from ..runtime.stream_modes import DEFAULT_STREAM_MODES, ApiStreamMode
from ..runtime.wire import UNSEARCHED_STATE_KEYS
from .door import readable
from .server_owned import strip_server_owned, strip_server_owned_message

__all__ = [
    "ASSISTANT_ID",
    "GRAPH_ID",
    "MAX_OFFSET",
    "MAX_PRUNE_IDS",
    "MAX_THREAD_IDS",
    "NO_INPUT",
    "THREAD_ID_PATTERN",
    "CheckpointRef",
    "HistoryQuery",
    "MessageIn",
    "RunCommand",
    "RunConfig",
    "RunCreate",
    "RunInput",
    "RunOut",
    "StateUpdate",
    "ThreadCount",
    "ThreadCreate",
    "ThreadOut",
    "ThreadPatch",
    "ThreadPrune",
    "ThreadSearch",
    "ThreadTTLIn",
    "TokenUsageOut",
    "selected",
]

ASSISTANT_ID = "lead_agent"
GRAPH_ID = "lead_agent"

MAX_OFFSET = 2**31 - 1
"""The largest page offset: beyond it a database refuses the number itself (SQLite's
integers are 64-bit; ``?offset=2**63`` raised OverflowError)."""

_IGNORED = "Accepted for compatibility with LangGraph Platform and ignored: "


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


_ROLES = {"user": "human", "human": "human", "assistant": "ai", "ai": "ai", "system": "system", "tool": "tool"}


class MessageIn(BaseModel):
    """One input message; keys beyond these reach LangChain unchanged."""

    model_config = ConfigDict(extra="allow")

    type: Literal["human", "ai", "system", "tool"] | None = None
    role: Literal["user", "human", "assistant", "ai", "system", "tool"] | None = None
    content: str | list[dict[str, Any] | str]
    id: str | None = None

    @model_validator(mode="after")
    def _kind_given(self) -> MessageIn:
        if self.type is None and self.role is None:
            raise ValueError("a message needs a 'type' (human, ai, system, tool) or a 'role' (user, assistant, ...)")
        if self.kind == "tool" and not (self.model_extra or {}).get("tool_call_id"):
            raise ValueError("a tool message needs 'tool_call_id'")
        try:  # what the run will do with it: a key LangChain cannot take fails here, not in the run
            convert_to_messages([self.for_graph()])
        except (ValueError, TypeError, NotImplementedError) as exc:
            raise ValueError(f"not a message LangChain accepts: {exc}") from None
        return self

    @property
    def kind(self) -> str:
        return self.type or _ROLES[self.role or "user"]

    def for_graph(self) -> dict[str, Any]:
        """The dict LangChain's message coercion expects (``type`` set, no ``None`` id)."""
        message = strip_server_owned_message(self.model_dump(exclude_none=True))
        message.pop("role", None)
        message["type"] = self.kind
        return message


class RunInput(_Request):
    messages: list[MessageIn] = Field(min_length=1)


class RunConfig(BaseModel):
    """LangGraph's run ``config``: ``recursion_limit`` and ``tags`` apply; keys of
    ``configurable`` reach the run's context (host keys excepted); other keys are ignored."""

    model_config = ConfigDict(extra="allow")

    tags: list[str] = Field(default_factory=list)
    recursion_limit: int | None = Field(default=None, ge=1, le=100_000)
    configurable: dict[str, Any] = Field(default_factory=dict)


class CheckpointRef(BaseModel):
    model_config = ConfigDict(extra="allow")

    thread_id: str | None = None
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None
    checkpoint_map: dict[str, Any] | None = None


class RunCommand(_Request):
    """LangGraph's ``Command`` as a run's input: ``resume`` answers the thread's pending
    interrupt(s) (a value, or a map of interrupt id to value), ``update`` writes state first,
    ``goto`` names the node(s) to run next."""

    resume: Any = None
    update: dict[str, Any] | list[Any] | None = None
    goto: str | dict[str, Any] | list[str | dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _says_something(self) -> RunCommand:
        if not self.model_fields_set:
            raise ValueError("a command needs 'resume', 'update' or 'goto'")
        return self

    @property
    def resumes(self) -> bool:
        return "resume" in self.model_fields_set

    def as_mapping(self) -> dict[str, Any]:
        """The keys the client set (``resume: null`` is a resume with None); an update's
        messages lose the keys only the host writes (``server_owned.py``)."""
        mapping: dict[str, Any] = {
            key: getattr(self, key) for key in ("resume", "update", "goto") if key in self.model_fields_set
        }
        if "update" in mapping:
            mapping["update"] = strip_server_owned(mapping["update"])
        return mapping


_Nodes = Literal["*"] | list[str] | None


NO_INPUT = (
    "'input' is required unless the run resumes with 'command', re-runs from a 'checkpoint' "
    "(or 'checkpoint_id') or continues a thread paused before or after a node"
)
"""Why a run without input is refused where there is nothing to continue."""


class RunCreate(_Request):
    """A run. ``input`` may be left out when the run resumes the thread with ``command``, or
    re-runs it from a checkpoint (``checkpoint`` / ``checkpoint_id``): LangGraph then executes
    what was next at that checkpoint again, which is how a chat UI regenerates an answer. With
    none of the three, the run goes on from the thread's latest checkpoint, which is how a run
    stopped by ``interrupt_before`` goes on (as on LangGraph's server); where the thread has
    nothing pending, the missing input is the client's mistake and said so (``NO_INPUT``)."""

    input: RunInput | None = Field(
        default=None,
        description=(
            "Required, except to resume with `command`, re-run the thread from `checkpoint` (regenerate) "
            "or continue a thread paused by `interrupt_before`/`interrupt_after` (no input at all)."
        ),
    )
    goal: str | None = Field(default=None, description="A goal the run keeps working towards (DeerFlow).")
    context: dict[str, Any] = Field(default_factory=dict, description="The run's runtime context.")
    assistant_id: str | None = Field(
        default=None,
        description=f"An assistant's id, or '{ASSISTANT_ID}' (the default when omitted); its config and context "
        "lie under the run's own.",
    )
    config: RunConfig | None = None
    metadata: dict[str, Any] = Field(default_factory=dict, description="Stored with the run and its checkpoints.")
    stream_mode: ApiStreamMode | list[ApiStreamMode] | None = Field(
        default=None,
        description=(
            "Event kinds to stream. Omitted: values, updates and messages-tuple (values alone for /wait). "
            "tools and lifecycle produce no events."
        ),
    )
    stream_subgraphs: bool = False
    stream_resumable: bool | None = Field(default=None, description=_IGNORED + "every run's stream is resumable.")
    on_disconnect: Literal["cancel", "continue"] = Field(
        default="continue", description="What a dropped stream does to the run (stream routes)."
    )
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = Field(
        default="interrupt",
        description="What this run does to runs already on the thread; DeerFlow's default is interrupt.",
    )
    if_not_exists: Literal["create", "reject"] = Field(
        default="reject", description="create: start the thread when it does not exist."
    )
    after_seconds: float | None = Field(
        default=None, ge=0, le=86_400, description="Stay pending this long before starting (at most a day)."
    )
    checkpoint: CheckpointRef | None = Field(default=None, description="Fork the thread from this checkpoint.")
    checkpoint_id: str | None = Field(default=None, description="Fork the thread from this checkpoint.")
    durability: Literal["sync", "async", "exit"] | None = None
    command: RunCommand | None = Field(
        default=None,
        description="Resume an interrupted thread (`resume`), write state (`update`), go to a node (`goto`).",
    )
    interrupt_before: _Nodes = Field(default=None, description="Pause before these graph nodes ('*': every node).")
    interrupt_after: _Nodes = Field(default=None, description="Pause after these graph nodes ('*': every node).")
    webhook: str | None = Field(
        default=None,
        description="Called (POST, LangGraph's payload, signed) once the run ended; a URL the Gateway's "
        "webhooks.url policy refuses is a 422.",
    )
    feedback_keys: list[str] | None = Field(default=None, description=_IGNORED + "no LangSmith feedback.")
    langsmith_tracer: dict[str, Any] | None = Field(default=None, description=_IGNORED + "use LangSmith's settings.")
    on_completion: Literal["delete", "keep"] | None = Field(
        default=None, description="A stateless run's thread once it ended (default delete); ignored on a thread's run."
    )
    checkpoint_during: bool | None = Field(default=None, description=_IGNORED + "use durability.")
    strict_resume: bool | None = Field(default=None, description=_IGNORED + "a resume needs a pending interrupt.")

    @model_validator(mode="before")
    @classmethod
    def _command_replaces_input(cls, data: Any) -> Any:
        # As LangGraph's server does: with a command, the input is not the graph's (clients
        # such as agent-chat-ui send "input": {} next to a resume).
        if isinstance(data, dict) and data.get("command") is not None and "input" in data:
            data = {k: v for k, v in data.items() if k != "input"}
        return data

    @property
    def continues(self) -> bool:
        """No input, command or checkpoint: the run goes on from the thread's checkpoint,
        which only a thread its graph paused has (the route checks: ``NO_INPUT``)."""
        return self.input is None and self.command is None and self.fork_checkpoint_id is None

    @property
    def stream_modes(self) -> tuple[str, ...]:
        return self.stream_modes_or(DEFAULT_STREAM_MODES)

    def stream_modes_or(self, default: tuple[str, ...]) -> tuple[str, ...]:
        """The modes asked for, else ``default`` (the route's: ``/wait`` streams values)."""
        if self.stream_mode is None:
            return default
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else self.stream_mode
        return tuple(dict.fromkeys(modes))

    @property
    def fork_checkpoint_id(self) -> str | None:
        if self.checkpoint is not None and self.checkpoint.checkpoint_id:
            return self.checkpoint.checkpoint_id
        return self.checkpoint_id


THREAD_ID_PATTERN = r"^[\w.:@~-]{1,64}$"
"""A client-chosen thread id: it goes into every URL of the thread, so no spaces, slashes or
control characters (one with them could be created but never addressed again)."""


class ThreadTTLIn(_Request):
    """A thread's ``ttl`` as ``langgraph_sdk`` sends it: minutes of inactivity after which
    the sweep applies ``strategy`` (None: ``checkpointer.ttl.strategy``; ``deerflow_ext.expiry``)."""

    strategy: Literal["delete", "keep_latest"] | None = None
    ttl: float = Field(gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)


_TTL_DESCRIPTION = (
    "minutes without activity after which the thread is deleted (strategy delete) or pruned to its "
    f"latest checkpoint (keep_latest); a number is taken as delete's; at most {MAX_TTL_MINUTES} (100 years)"
)


class ThreadCreate(_Request):
    thread_id: str | None = Field(default=None, pattern=THREAD_ID_PATTERN)
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = None
    supersteps: list[dict[str, Any]] | None = None
    ttl: ThreadTTLIn | Annotated[float, Field(gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)] | None = Field(
        default=None, description=_TTL_DESCRIPTION
    )

    @field_validator("supersteps")
    @classmethod
    def _no_supersteps(cls, value: list[dict[str, Any]] | None) -> None:
        if value:
            raise ValueError("creating a thread from supersteps is not supported; create it, then run it")
        return None


class ThreadPatch(_Request):
    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl: ThreadTTLIn | Annotated[float, Field(gt=0, le=MAX_TTL_MINUTES, allow_inf_nan=False)] | None = Field(
        default=None, description=_TTL_DESCRIPTION + "; counted from now"
    )


MAX_PRUNE_IDS = 1000
"""The most threads one ``threads.prune`` names: each is locked and pruned in one request."""


class ThreadPrune(_Request):
    """LangGraph's ``POST /threads/prune``: ``delete`` the threads (with their runs,
    checkpoints and crons) or keep each with only its latest checkpoint (``keep_latest``)."""

    thread_ids: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(max_length=MAX_PRUNE_IDS)
    strategy: Literal["delete", "keep_latest"] = "delete"


_ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
_ThreadSortBy = Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"]


class ThreadCount(_Request):
    metadata: dict[str, Any] = Field(default_factory=dict)
    values: dict[str, Any] | None = None
    status: _ThreadStatus | None = None

    @field_validator("metadata")
    @classmethod
    def _quotable_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_filter_keys(value, "metadata")  # the filter is said in SQL (persistence.json_match)
        return value

    @field_validator("values")
    @classmethod
    def _searchable_values(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value:
            check_filter_keys(value, "values")
            for key in value:
                if key in UNSEARCHED_STATE_KEYS:
                    raise ValueError(f"{key!r} is not searchable; filter by the state's other values")
        return value


MAX_THREAD_IDS = 10_000
"""The most ``ids`` one thread search may name: each is a bound parameter, and PostgreSQL's
protocol carries at most 32,767 (more answered 503 and logged the whole statement)."""


class ThreadSearch(ThreadCount):
    ids: list[str] | None = Field(default=None, max_length=MAX_THREAD_IDS)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: _ThreadSortBy = "updated_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[str] | None = None
    extract: dict[str, str] | None = Field(default=None, description=_IGNORED + "no extraction.")


class StateUpdate(_Request):
    values: dict[str, Any] | list[dict[str, Any]] | None = None
    as_node: str | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: str | None = None


class HistoryQuery(_Request):
    limit: int = Field(default=10, ge=1, le=1000)
    before: str | CheckpointRef | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: CheckpointRef | None = None
    select: list[str] | None = None

    @field_validator("metadata")
    @classmethod
    def _filter_keys(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # The checkpointers refuse any other key (LangGraph's filter-key rule), mid-query.
        if value and len(value) > MAX_FILTER_KEYS:  # each key one condition of the saver's query
            raise ValueError(f"a filter names at most {MAX_FILTER_KEYS} keys, this one {len(value)}")
        for key in value or {}:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", key):
                raise ValueError(f"filter key {key!r} may hold only letters, digits, '_', '.' and '-'")
        return value

    @property
    def before_id(self) -> str | None:
        return self.before if isinstance(self.before, str) or self.before is None else self.before.checkpoint_id


# ---------------------------------------------------------------------------- responses


def _utc(value: datetime) -> datetime:
    # SQLite hands timestamps back without their zone; every stored time is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


Timestamp = Annotated[datetime, AfterValidator(_utc)]


class ThreadOut(BaseModel):
    thread_id: str
    created_at: Timestamp
    updated_at: Timestamp
    metadata: dict[str, Any]
    status: str
    values: dict[str, Any] | None = None
    interrupts: dict[str, list[Any]] = Field(default_factory=dict)
    title: str | None = Field(default=None, description="The title the Gateway generated (DeerFlow).")

    @classmethod
    def of(
        cls,
        record: ThreadRecord,
        values: dict[str, Any] | None = None,
        interrupts: dict[str, list[Any]] | None = None,
    ) -> ThreadOut:
        return cls(
            thread_id=record.id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            metadata=readable(record.metadata, f"the metadata of thread {record.id}"),
            status=record.status,
            values=values,
            interrupts=interrupts or {},
            title=record.title,
        )


class TokenUsageOut(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


_REQUEST_ONLY = ("assistant_id", "metadata", "multitask_strategy")


def request_kwargs(stored: dict[str, Any]) -> dict[str, Any]:
    """A run's ``kwargs`` as LangGraph shows them: its stored request but the fields the run
    shows on their own (``RunOut``, and the webhook payload)."""
    return {k: v for k, v in stored.items() if k not in _REQUEST_ONLY}


class RunOut(BaseModel):
    run_id: str
    thread_id: str
    assistant_id: str
    created_at: Timestamp
    updated_at: Timestamp
    status: str
    metadata: dict[str, Any]
    multitask_strategy: str
    kwargs: dict[str, Any] = Field(description="The run's request (input, config, stream_mode, ...).")
    outcome: str | None = Field(description="completed, aborted or failed (the extension contract's TaskOutcome).")
    input: dict[str, Any] = Field(description="The request as stored (DeerFlow).")
    answer: str | None
    error: str | None
    token_usage: TokenUsageOut
    started_at: Timestamp | None
    finished_at: Timestamp | None

    @classmethod
    def of(cls, record: RunRecord) -> RunOut:
        stored = readable(record.input, f"the request of run {record.id}")
        return cls(
            run_id=record.id,
            thread_id=record.thread_id,
            assistant_id=str(stored.get("assistant_id") or ASSISTANT_ID),
            created_at=record.created_at,
            updated_at=record.finished_at or record.started_at or record.created_at,
            status=record.status,
            metadata=dict(stored.get("metadata") or {}),
            multitask_strategy=str(stored.get("multitask_strategy") or "interrupt"),
            kwargs=request_kwargs(stored),
            outcome=record.outcome,
            input=stored,
            answer=record.answer,
            error=record.error,
            token_usage=TokenUsageOut.model_validate(record.tokens, from_attributes=True),
            started_at=record.started_at,
            finished_at=record.finished_at,
        )


def selected(document: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """LangGraph's ``select``: only the named fields (all when None)."""
    return document if not select else {k: v for k, v in document.items() if k in select}
