"""The shape of ``config.yaml``.

Plugin entries are strict (``extra="forbid"``) because a misspelt key such as ``enable:``
would otherwise silently load an extension the operator meant to switch off. Model entries
are open: every key besides ``name`` and ``use`` is a constructor argument of the model class.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = [
    "JSON_DEPTH_CEILING",
    "MODEL_PURPOSES",
    "AppConfig",
    "GatewayConfig",
    "GoalConfig",
    "HttpConfig",
    "MemoryConfig",
    "ModelEntry",
    "ModelPurpose",
    "PluginEntry",
    "RequestLimits",
    "RetryConfig",
    "SubagentsConfig",
    "SummarizationConfig",
    "TitleConfig",
    "TokenBudgetConfig",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PluginEntry(_Strict):
    """One ``plugins:`` record. ``use`` is an entry-point name or ``module:attr``.

    Records in DeerFlow's shape load unchanged: ``name`` may be left out (it is then the
    ``use`` value, and must still be unique), and ``package`` names the distribution that
    provides the extension. ``package`` is informational: ``extensions list`` shows it and
    ``enable``/``disable``/``remove`` accept it as a name; loading never reads it, because
    ``use`` alone says what to import.

    ``intercept: true`` is the operator's opt-in (beyond DeerFlow) for middlewares that make
    decisions: they may rewrite a request, short-circuit the call or replace its result, and
    they fail *closed* (an exception fails the run, attributed). Without it every contributed
    middleware is observe-only and fails open (``deerflow_ext.extensions.composition.isolation``).
    """

    name: str = Field(min_length=1)
    use: str = Field(min_length=1)
    package: str | None = Field(default=None, min_length=1)
    enabled: bool = True
    required: bool = False
    intercept: bool = False
    config: dict[str, Any] = Field(default_factory=dict)
    table_prefix: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _name_defaults_to_use(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("name") is None and isinstance(data.get("use"), str):
            return {**data, "name": data["use"]}
        return data

    @field_validator("table_prefix")
    @classmethod
    def _prefix_not_empty(cls, value: str | None) -> str | None:
        # An empty prefix would claim every table in the database, host tables included.
        if value is not None and not value.strip():
            raise ValueError("table_prefix must not be empty; omit the key if the extension owns no tables")
        return value


ModelPurpose = Literal["lead", "subagent", "title", "memory", "summarization", "goal"]
"""What a model is used for: the agents' own turns, or one of the host's system calls."""

MODEL_PURPOSES: tuple[ModelPurpose, ...] = get_args(ModelPurpose)


class ModelEntry(BaseModel):
    """A chat model imported by ``use`` (``module:Class``); extra keys are its constructor kwargs.

    ``purposes`` puts some of the work on this model: ``[title, memory, summarization]`` moves
    the host's own calls to a cheaper one. A purpose no entry claims runs on the lead model:
    the entry claiming ``lead``, else the first entry.
    ``max_retries`` is refused: retries are the host's retry layer's (``retry:``), and a
    provider retrying inside it multiplies the attempts (3 x 3 = 9 calls per failure).
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1)
    use: str = Field(min_length=1, pattern=r"^[\w.]+:[\w.]+$")
    purposes: tuple[ModelPurpose, ...] = ()

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _retries_are_the_hosts(self) -> ModelEntry:
        if "max_retries" in (self.model_extra or {}):
            raise ValueError(
                "max_retries is not a model key: retries come from one policy, the retry: section "
                "(retry.max_retries); remove it here"
            )
        return self


class RetryConfig(_Strict):
    """The one retry policy for model calls (the host's retry layer; providers never retry)."""

    max_retries: int = Field(default=2, ge=0, le=10)
    backoff_seconds: float = Field(default=0.5, ge=0, le=60)


class TokenBudgetConfig(_Strict):
    """Token limits the host enforces; projected to extensions as ``HostPolicySnapshot``."""

    enabled: bool = False
    max_input_tokens: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)
    warn_fraction: float = Field(default=0.8, gt=0, le=1)
    hard_fraction: float = Field(default=1.0, gt=0, le=1)


class SubagentsConfig(_Strict):
    enabled: bool = True
    max_per_run: int = Field(default=3, ge=0)
    timeout_seconds: float = Field(default=120.0, gt=0)
    token_budget: TokenBudgetConfig | None = None
    # Per-agent overrides of the subagent budget, keyed by subagent name.
    agents: dict[str, TokenBudgetConfig] = Field(default_factory=dict)


class TitleConfig(_Strict):
    enabled: bool = True
    max_chars: int = Field(default=60, gt=0)


class MemoryConfig(_Strict):
    enabled: bool = True
    debounce_seconds: float = Field(default=0.5, ge=0)


class SummarizationConfig(_Strict):
    enabled: bool = True
    trigger_messages: int = Field(default=24, ge=4)
    keep_messages: int = Field(default=6, ge=1)


class GoalConfig(_Strict):
    max_continuations: int = Field(default=3, ge=0)


JSON_DEPTH_CEILING = 128
"""The deepest JSON the Gateway ever stores: pydantic refuses to serialise a document nested
much past 250 levels, so anything deeper could be written but never read back."""


class RequestLimits(_Strict):
    """What one HTTP request may carry (``gateway.limits``); bigger is refused at the door.

    Without them one client could make the Gateway buffer a 100 MB body, parse 100 000
    messages on its event loop, or store JSON so deep that reading it back fails. Bodies
    over ``max_body_bytes`` get 413 before they are read whole; the rest get 422 naming
    the field. "Bytes" are those of the field's compact JSON.
    """

    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    max_messages: int = Field(default=500, ge=1)
    max_message_bytes: int = Field(default=1024 * 1024, ge=256)
    max_field_bytes: int = Field(default=256 * 1024, ge=256)
    max_json_depth: int = Field(default=64, ge=4, le=JSON_DEPTH_CEILING)
    #: Seconds a request body may take to arrive in full (408 past it): a body sent a byte a
    #: second would otherwise hold its connection and its route for days.
    body_timeout_seconds: float = Field(default=60.0, gt=0)


class GatewayConfig(_Strict):
    """HTTP settings that belong with the deployment's config (``DEERFLOW_*`` variables win)."""

    cors_origins: list[str] | None = None
    #: Names the Gateway answers to (``Host`` header); unset: loopback names and DEERFLOW_HOST.
    allowed_hosts: list[str] | None = None
    #: Bearer token every route except /health and /ok requires; prefer DEERFLOW_API_TOKEN.
    api_token: str | None = Field(default=None, min_length=16, repr=False)
    limits: RequestLimits = Field(default_factory=RequestLimits)


class HttpConfig(_Strict):
    """Which of the Gateway's agent-protocol endpoints are served (``langgraph.json``'s
    ``http`` keys): ``/api/mcp`` (Model Context Protocol) and ``/api/a2a/{assistant_id}``
    (Agent-to-Agent). Both are on by default, as on LangGraph's server; switched off, their
    paths answer 404 like any unknown path."""

    disable_mcp: bool = False
    disable_a2a: bool = False


class AppConfig(_Strict):
    """The whole file. Every section is optional: an empty file is a working Gateway."""

    plugins: list[PluginEntry] = Field(default_factory=list)
    models: list[ModelEntry] = Field(default_factory=list)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    token_budget: TokenBudgetConfig = Field(default_factory=TokenBudgetConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    title: TitleConfig = Field(default_factory=TitleConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    summarization: SummarizationConfig = Field(default_factory=SummarizationConfig)
    goal: GoalConfig = Field(default_factory=GoalConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)

    @field_validator("plugins", "models")
    @classmethod
    def _unique_names(cls, entries: list[Any], info: ValidationInfo) -> list[Any]:
        # A field validator (not a model one) so the error's location is the list itself and
        # the operator is pointed at the right line, not at line 1 of the file.
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:
                unnamed = info.field_name == "plugins" and entry.name == entry.use
                hint = "; give each record its own name:" if unnamed else ";"
                raise ValueError(
                    f"duplicate {info.field_name} name {entry.name!r}{hint} names label log lines and CLI commands"
                )
            seen.add(entry.name)
        return entries

    @field_validator("models")
    @classmethod
    def _one_model_per_purpose(cls, entries: list[ModelEntry]) -> list[ModelEntry]:
        claimed: dict[str, str] = {}
        for entry in entries:
            for purpose in entry.purposes:
                if purpose in claimed:
                    raise ValueError(
                        f"purpose {purpose!r} is claimed by both {claimed[purpose]!r} and {entry.name!r}; "
                        "give each purpose to one model"
                    )
                claimed[purpose] = entry.name
        return entries
