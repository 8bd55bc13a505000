"""Request and response bodies of the assistant routes, in LangGraph Platform's shapes.

What ``langgraph_sdk``'s ``client.assistants`` sends: ``create`` (``graph_id``, ``config``,
``context``, ``metadata``, ``assistant_id``, ``if_exists``, ``name``, ``description``),
``update`` (the same, all optional; ``metadata`` merged), ``search``/``count`` (``metadata``,
``graph_id``, ``name``, paging, order, ``select``), ``get_versions`` and ``set_latest``.
Unknown keys are refused, as for the other routes (``schemas``). The Gateway has one graph,
so ``graph_id`` must name it; a misspelt one is a 422 naming the field, not an assistant that
cannot run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..persistence.assistant_tables import AssistantRecord
from ..persistence.json_match import check_filter_keys
from .schemas import GRAPH_ID, MAX_OFFSET, THREAD_ID_PATTERN, RunConfig

__all__ = [
    "AssistantCount",
    "AssistantCreate",
    "AssistantOut",
    "AssistantPatch",
    "AssistantSearch",
    "LatestVersion",
    "VersionsQuery",
]

SelectField = Literal[
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version",
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _the_graph(value: str | None) -> str | None:
    if value is not None and value != GRAPH_ID:
        raise ValueError(f"{value!r} is not a graph of this Gateway; its one graph is '{GRAPH_ID}'")
    return value


def _filter(value: dict[str, Any]) -> dict[str, Any]:
    check_filter_keys(value, "metadata")
    return value


class _Fields(_Request):
    config: RunConfig | None = Field(default=None, description="configurable, recursion_limit, tags: under the run's.")
    context: dict[str, Any] | None = Field(default=None, description="The runs' context, under the run's own.")
    metadata: dict[str, Any] | None = None
    name: str | None = Field(default=None, min_length=1, max_length=1000)
    description: str | None = Field(default=None, max_length=10_000)

    def config_dict(self) -> dict[str, Any] | None:
        """The config as the client gave it (no defaults filled in)."""
        return None if self.config is None else self.config.model_dump(mode="json", exclude_unset=True)


class AssistantCreate(_Fields):
    graph_id: str = Field(description=f"'{GRAPH_ID}', the one graph.")
    assistant_id: str | None = Field(default=None, pattern=THREAD_ID_PATTERN, description="Default: a new UUID.")
    if_exists: Literal["raise", "do_nothing"] = "raise"

    _graph = field_validator("graph_id")(_the_graph)


class AssistantPatch(_Fields):
    """A new version; what is left out is kept, ``metadata`` is merged."""

    graph_id: str | None = None

    _graph = field_validator("graph_id")(_the_graph)


class AssistantCount(_Request):
    metadata: dict[str, Any] = Field(default_factory=dict)
    graph_id: str | None = None
    name: str | None = Field(default=None, description="A case-insensitive part of the name.")

    _keys = field_validator("metadata")(_filter)


class AssistantSearch(AssistantCount):
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[SelectField] | None = None


class VersionsQuery(_Request):
    metadata: dict[str, Any] = Field(default_factory=dict)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)

    _keys = field_validator("metadata")(_filter)


class LatestVersion(_Request):
    version: int = Field(ge=1, le=2**31 - 1)


class AssistantOut(BaseModel):
    """An assistant (or, from ``/versions``, one version of it)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: AssistantRecord) -> AssistantOut:
        return cls.model_validate(record, from_attributes=True)  # the record's fields, by name
