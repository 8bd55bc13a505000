"""The shape of ``config.yaml``.

Plugin entries are strict (``extra="forbid"``) because a misspelt key such as ``enable:``
would otherwise silently load an extension the operator meant to switch off. Model entries
are open: every key besides ``name`` and ``use`` is a constructor argument of the model class.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .plugin_values import SettingValueIn
from .ttl import CheckpointerConfig, StoreTTLConfig
from .webhooks_config import WebhooksConfig

__all__ = [
    "JSON_DEPTH_CEILING",
    "MIN_TOKEN_CHARS",
    "MODEL_PURPOSES",
    "AccessRule",
    "AppConfig",
    "AuthConfig",
    "AuthorizationConfig",
    "GatewayConfig",
    "GoalConfig",
    "HostAccess",
    "HttpConfig",
    "McpConfig",
    "MemoryConfig",
    "ModelEntry",
    "ModelInvocationGrant",
    "ModelPurpose",
    "PluginEntry",
    "RequestLimits",
    "RetryConfig",
    "SkillsConfig",
    "StoreConfig",
    "StoreIndexConfig",
    "SubagentsConfig",
    "SummarizationConfig",
    "TitleConfig",
    "TokenBudgetConfig",
    "long_enough_token",
    "plugin_names",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _explicit_name(record: Any) -> str | None:
    if isinstance(record, PluginEntry):
        return record.name
    name = record.get("name") if isinstance(record, Mapping) else None
    return name if isinstance(name, str) else None


def plugin_names(records: Sequence[Any]) -> list[str | None]:
    """The name each ``plugins:`` record goes by, in order (raw mappings or entries).

    A named record goes by its name. An unnamed one goes by its ``use``, and when several
    unnamed records share a ``use`` — valid, as in DeerFlow — the second is ``<use>#2``, the
    third ``<use>#3``...: a name for log lines and for ``extensions enable/disable/remove``
    that follows the file's order (an explicit ``name`` keeps it stable when records are
    moved). ``None`` for a record that has neither (validation reports it).
    """
    unnamed: dict[str, int] = {}
    names: list[str | None] = []
    for record in records:
        name = _explicit_name(record)
        use = record.get("use") if isinstance(record, Mapping) else None
        if name is None and isinstance(use, str):
            unnamed[use] = unnamed.get(use, 0) + 1
            name = use if unnamed[use] == 1 else f"{use}#{unnamed[use]}"
        names.append(name)
    return names


class PluginEntry(_Strict):
    """One ``plugins:`` record. ``use`` is an entry-point name or ``module:attr``.

    Records in DeerFlow's shape load unchanged: ``name`` may be left out, and ``package``
    names the distribution that provides the extension. A record without a name is named by
    its ``use``; as in DeerFlow, several records may share a ``use`` (the same extension
    twice, with different ``config``), and the n-th unnamed one of a ``use`` is then named
    ``<use>#<n>`` (:func:`plugin_names`). ``package`` is informational: ``extensions list`` shows it and
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
    # Values for the settings fields of the full-stack plugins this entry registers, by plugin
    # namespace then field key (docs/SPEC.md, "Full-stack plugins"). Types are strict here,
    # and each value is checked against its field when the plugin registers.
    settings: dict[str, dict[str, SettingValueIn]] = Field(default_factory=dict)
    # Host capabilities granted to this record's services (docs/SPEC.md, "Model invocation").
    host_access: HostAccess = Field(default_factory=lambda: HostAccess())

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


class ModelInvocationGrant(_Strict):
    """The models an extension's services may call (``deps.model_invoker``), by logical role.

    ``roles`` maps a role the extension asks for (``classifier``) to a configured model's
    name; the limits bound every call of that extension (one concurrency pool per record).
    """

    roles: dict[str, str] = Field(min_length=1)
    max_concurrency: int = Field(default=2, ge=1, le=64)
    timeout_seconds: float = Field(default=60, gt=0, le=600)
    max_input_chars: int = Field(default=262_144, ge=1, le=1_048_576)
    max_output_chars: int = Field(default=65_536, ge=1, le=1_048_576)

    @field_validator("roles")
    @classmethod
    def _plain_names(cls, roles: dict[str, str]) -> dict[str, str]:
        for role, model in roles.items():
            for text in (role, model):
                if not text.strip() or text != text.strip():
                    raise ValueError(f"role {role!r} -> {model!r}: names must be non-blank, without surrounding spaces")
        return roles


class HostAccess(_Strict):
    """Host capabilities an operator grants one record; nothing is granted by default."""

    model_invocation: ModelInvocationGrant | None = None


# PluginEntry names HostAccess, defined after it.
PluginEntry.model_rebuild()


ModelPurpose = Literal["lead", "subagent", "title", "memory", "summarization", "goal"]
"""What a model is used for: the agents' own turns, or one of the host's system calls."""

MODEL_PURPOSES: tuple[ModelPurpose, ...] = get_args(ModelPurpose)


MIN_TOKEN_CHARS = 16


def long_enough_token(value: str) -> str:
    """An API token of at least :data:`MIN_TOKEN_CHARS` characters, else a refusal in words
    that never shows the token (pydantic's own says "at least 16 items")."""
    if len(value) >= MIN_TOKEN_CHARS:
        return value
    raise PydanticCustomError(
        "token_too_short",
        "too short ({length} characters); an API token needs at least {least}, "
        "e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
        {"length": len(value), "least": MIN_TOKEN_CHARS},
    )


_USE = re.compile(r"[\w.]+:[\w.]+")


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
    use: str = Field(min_length=1)
    purposes: tuple[ModelPurpose, ...] = ()

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @field_validator("use")
    @classmethod
    def _module_colon_class(cls, value: str) -> str:
        """``module:Class``, said in words (and the likely fix), never as the regex it is."""
        if _USE.fullmatch(value):
            return value
        module, dot, name = value.rpartition(".")
        if ":" not in value and dot and _USE.fullmatch(f"{module}:{name}"):
            fix = f"; did you mean {module}:{name}?"
        else:
            fix = ", e.g. langchain_openai:ChatOpenAI"
        raise PydanticCustomError(
            "use_format",
            "must be module:Class — the module to import, a colon, then the class in it{fix}",
            {"fix": fix},
        )

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
    #: The plugin model tool groups subagents get; None: the lead agent's (``tool_groups``).
    tool_groups: list[str] | None = None


class TitleConfig(_Strict):
    enabled: bool = True
    max_chars: int = Field(default=60, gt=0)
    #: Seconds a title call may take before the thread stays untitled; None: no bound.
    timeout_seconds: float | None = Field(default=None, gt=0)


class MemoryConfig(_Strict):
    enabled: bool = True
    debounce_seconds: float = Field(default=0.5, ge=0)


class SummarizationConfig(_Strict):
    enabled: bool = True
    trigger_messages: int = Field(default=24, ge=4)
    keep_messages: int = Field(default=6, ge=1)


class GoalConfig(_Strict):
    max_continuations: int = Field(default=3, ge=0)


class StoreIndexConfig(_Strict):
    """``store.index``: the store's semantic search, in ``langgraph.json``'s keys.

    ``embed`` is ``provider:model`` (LangChain's ``init_embeddings``), or ``module:attr`` /
    ``./file.py:attr`` naming an ``Embeddings`` object or a function of a list of texts;
    ``dims`` the length of its vectors; ``fields`` the JSON paths of a value that are
    embedded (``$``: the whole value). What it resolves to is ``deerflow_ext.semantic``'s.
    """

    embed: str = Field(min_length=3, pattern=r"^[^:\s]+:\S+$")
    dims: int = Field(ge=1, le=16000)
    fields: list[str] = Field(default_factory=lambda: ["$"], min_length=1)


class StoreConfig(_Strict):
    """``store``: the LangGraph store's options. With no ``index``, ``query`` in a search is
    ignored as LangGraph's own server ignores it without one (newest first, ``score`` null);
    ``ttl`` is how long items live (``config.ttl``)."""

    index: StoreIndexConfig | None = None
    ttl: StoreTTLConfig = Field(default_factory=StoreTTLConfig)


class SkillsConfig(_Strict):
    """``skills``: where skill folders live (DeerFlow's ``skills/public`` and
    ``skills/custom`` under ``path``; relative to ``config.yaml``'s folder). Which are on is
    ``extensions_config.json``'s ``skills`` section."""

    path: str = "skills"
    #: DeerFlow's sandbox mount of the folder: accepted so its config loads, unused here.
    container_path: str | None = None


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
    api_token: str | None = Field(default=None, repr=False)
    limits: RequestLimits = Field(default_factory=RequestLimits)
    #: Whether runs leave the journal run evidence readers page (one write as a run ends):
    #: unset, when the extensions have a service, router or plugin that could read it.
    run_journal: bool | None = None

    @field_validator("api_token")
    @classmethod
    def _token_long_enough(cls, value: str | None) -> str | None:
        return None if value is None else long_enough_token(value)


class AccessRule(_Strict):
    """One role's rule on one resource, as DeerFlow's built-in RBAC reads it: ``allow`` is
    ``"*"``, ``true`` (every target), ``false`` (none) or a list of targets, and absent means
    every target; ``deny`` lists targets refused whatever ``allow`` says (deny wins)."""

    allow: Literal["*"] | StrictBool | list[Annotated[StrictStr, Field(min_length=1)]] = "*"
    deny: list[Annotated[StrictStr, Field(min_length=1)]] = Field(default_factory=list)

    def permits(self, target: str) -> bool:
        if target in self.deny:
            return False
        if self.allow == "*" or self.allow is True:
            return True
        return isinstance(self.allow, list) and target in self.allow


class AuthorizationConfig(_Strict):
    """Role-based authorization of plugin resources (DeerFlow's ``authorization:`` section).

    ``roles`` maps a role to its rules per resource (``plugin_action``: targets
    ``<namespace>/<action>``). A role with no rule for a resource is unrestricted on it, as
    in DeerFlow; a principal without a known role cannot be answered, which ``fail_closed``
    (the default) turns into a refusal. Internal callers take ``default_role``.
    """

    enabled: bool = False
    fail_closed: bool = True
    default_role: str = "user"
    roles: dict[str, dict[str, AccessRule]] = Field(default_factory=dict)


class HttpConfig(_Strict):
    """Which of the Gateway's agent-protocol endpoints are served (``langgraph.json``'s
    ``http`` keys): ``/api/mcp`` (Model Context Protocol) and ``/api/a2a/{assistant_id}``
    (Agent-to-Agent). Both are on by default, as on LangGraph's server; switched off, their
    paths answer 404 like any unknown path."""

    disable_mcp: bool = False
    disable_a2a: bool = False
    disable_webhooks: bool = Field(
        default=False, description="Refuse every run's and cron's webhook (422): no URL is ever called."
    )


class McpConfig(_Strict):
    """The agent's MCP servers (``extensions_config.json``'s ``mcpServers``): what an API
    caller may point them at, and how long the Gateway waits for them.

    A stdio server runs a command on this machine, and ``extensions_config.json`` is writable
    over HTTP: a ``PUT`` whose stdio server has a new or changed ``command``, ``args`` or
    ``env`` is refused (422) unless its command is in ``allowed_commands`` (the command as
    written: a bare name or a path). A new or changed ``http``/``sse`` URL written over HTTP
    must pass the webhooks' URL policy (``webhooks.url``: https, no loopback or private
    address as written or as its name resolves, ports, domains), unless it starts with one
    of ``allowed_url_prefixes``, the operator's explicit allowance. The CLI writes anything.
    """

    allowed_commands: list[str] = Field(default_factory=list)
    allowed_url_prefixes: list[str] = Field(default_factory=list)
    #: Seconds a run waits for a server that is starting; past it the run goes on without
    #: that server's tools (the start goes on, for the next run).
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Seconds one tool call may take before it is a tool error the model sees.
    call_timeout_seconds: float = Field(default=60.0, gt=0)
    #: A server that failed is started again after this many seconds, doubled per failure in
    #: a row up to ``max_restart_backoff_seconds``.
    restart_backoff_seconds: float = Field(default=1.0, ge=0)
    max_restart_backoff_seconds: float = Field(default=60.0, ge=0)


class AuthConfig(_Strict):
    """Per-user identity, as ``langgraph.json``'s ``auth`` key says it (``deerflow_ext.identity``).

    ``path``: ``module:attr`` or ``./file.py:attr`` (relative to this config file), naming a
    ``langgraph_sdk.Auth``. ``admin_token``: keep the Gateway's API token
    (``DEERFLOW_API_TOKEN`` / ``gateway.api_token``) as an administrator's credential next
    to the handlers; off by default, when ``auth`` is set the token is not accepted."""

    path: str
    admin_token: bool = False

    @field_validator("path")
    @classmethod
    def _module_and_attribute(cls, value: str) -> str:
        target, colon, attribute = value.rpartition(":")
        if not colon or not target.strip() or not attribute.strip().isidentifier():
            raise ValueError(
                f"must be 'module:attr' or './file.py:attr' (the Auth object after the colon), not {value!r}"
            )
        return value


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
    auth: AuthConfig | None = None
    # Time to live of threads (langgraph.json's keys; ``config.ttl``).
    checkpointer: CheckpointerConfig = Field(default_factory=CheckpointerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    webhooks: WebhooksConfig = Field(default_factory=WebhooksConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    authorization: AuthorizationConfig = Field(default_factory=AuthorizationConfig)
    #: The lead agent's tool groups (DeerFlow's agent ``tool_groups``): plugin model tools
    #: whose ``group`` is listed; None: every group.
    tool_groups: list[str] | None = None

    @field_validator("plugins", mode="before")
    @classmethod
    def _name_unnamed_records(cls, records: Any) -> Any:
        if not isinstance(records, list):
            return records  # pydantic reports the type
        names = plugin_names(records)
        return [
            {**record, "name": name} if isinstance(record, Mapping) and record.get("name") is None and name else record
            for record, name in zip(records, names, strict=True)
        ]

    @field_validator("plugins", "models")
    @classmethod
    def _unique_names(cls, entries: list[Any], info: ValidationInfo) -> list[Any]:
        # A field validator (not a model one) so the error's location is the list itself and
        # the operator is pointed at the right line, not at line 1 of the file.
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:
                unnamed = info.field_name == "plugins" and entry.name.partition("#")[0] == entry.use
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
