"""The host's own tables: threads and runs.

The host keeps its tables under a private ``MetaData`` so that alembic autogenerate compares
only what the host owns; extension tables live under their own metadata and migration chain
and are additionally filtered out by prefix (see ``deerflow_ext.extensions.plugin_loading.tables``).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, MetaData, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "ASSISTANT_TABLES",
    "CHECKPOINT_TABLES",
    "CRON_TABLE",
    "DEFAULT_USER_ID",
    "HOST_TABLES",
    "HOST_VERSION_TABLE",
    "LIVE_RUN_STATUSES",
    "RUN_EVENTS_TABLE",
    "STORE_TABLE",
    "STORE_VECTORS_TABLE",
    "THREAD_STATUS_AFTER",
    "WEBHOOK_TABLE",
    "Base",
    "GatewayProcessRow",
    "RunOutcome",
    "RunRow",
    "RunStatus",
    "ThreadLeaseRow",
    "ThreadRow",
    "ThreadStatus",
    "utcnow",
]

DEFAULT_USER_ID = "default"
"""The owner of a run recorded without a principal (and of every run before migration 0011):
the Gateway's one principal when it has no per-user identity."""

HOST_VERSION_TABLE = "alembic_version"
"""The host's alembic version table; extensions keep their own (e.g. ``acme_alembic_version``)."""


class ThreadStatus(enum.StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    INTERRUPTED = "interrupted"
    ERROR = "error"


class RunStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"


LIVE_RUN_STATUSES: tuple[RunStatus, ...] = (RunStatus.PENDING, RunStatus.RUNNING)
"""The statuses of a run some process may still be executing (queued or started)."""

THREAD_STATUS_AFTER: dict[str, ThreadStatus] = {
    RunStatus.SUCCESS: ThreadStatus.IDLE,
    RunStatus.INTERRUPTED: ThreadStatus.INTERRUPTED,
    RunStatus.ERROR: ThreadStatus.ERROR,
}
"""A thread's status once its latest run ended with the given status."""


class RunOutcome(enum.StrEnum):
    """Stored with the same values as ``deerflow_extension_api.TaskOutcome``."""

    COMPLETED = "completed"
    ABORTED = "aborted"
    FAILED = "failed"


def utcnow() -> datetime:
    return datetime.now(UTC)


_NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=_NAMING)


# Threads with a time to live alone: what the expiry sweep reads (migration 0013).
_EXPIRING = text("expires_at IS NOT NULL")


class ThreadRow(Base):
    __tablename__ = "threads"
    __table_args__ = (Index("ix_threads_expires_at", "expires_at", postgresql_where=_EXPIRING, sqlite_where=_EXPIRING),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    title: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default=ThreadStatus.IDLE.value, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    # ``metadata`` is reserved on declarative classes; the column keeps the domain name.
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict, nullable=False)
    # The state's values but ``messages``, written at a run's end: what thread search's
    # ``values`` filter reads (migration 0008; checkpoints are LangGraph's serialisation).
    state_values: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A time to live (LangGraph's thread ``ttl``; ``deerflow_ext.expiry``): what happens at
    # expiry (``delete`` or ``keep_latest``), the minutes of inactivity it allows, and when
    # the sweep looks at the thread next (migration 0013). NULL: kept until deleted.
    ttl_strategy: Mapped[str | None] = mapped_column(String(16), nullable=True)
    ttl_minutes: Mapped[float | None] = mapped_column(Float, nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


# The text migration 0005 wrote, built from the statuses it names.
_LIVE = text(f"status IN ({', '.join(repr(status.value) for status in LIVE_RUN_STATUSES)})")


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_thread_id_created_at", "thread_id", "created_at"),
        Index("ix_runs_status", "status"),
        # A thread's live runs alone: what a PostgreSQL take reads (migration 0005).
        Index("ix_runs_live_thread_id", "thread_id", postgresql_where=_LIVE, sqlite_where=_LIVE),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(64), ForeignKey("threads.id", ondelete="CASCADE"), nullable=False)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.PENDING.value, nullable=False)
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    input: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, nullable=False)
    answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    total_tokens: Mapped[int] = mapped_column(Integer, default=0, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Which process executes the run ("host:pid:token"): crash recovery and, later, scale-out
    # cancellation need to know whose run it is.
    owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # "interrupt" or "rollback" once another process asked this run to stop: the durable
    # record behind the NOTIFY signal, which a reconnecting listener can miss.
    cancel_requested: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # The principal that asked for the run (``ExtensionPrincipal.user_id``): what run evidence
    # readers and agent-run handles are scoped to (migration 0011).
    user_id: Mapped[str] = mapped_column(
        String(255), default=DEFAULT_USER_ID, server_default=DEFAULT_USER_ID, nullable=False
    )


class ThreadLeaseRow(Base):
    """Who held a thread across Gateway processes, and until when: written by Gateways of
    earlier releases only (PostgreSQL).

    Those wrote a row when they took a thread and deleted it when they gave it back; a waiter
    that found it expired terminated ``backend_pid``, and a row still present when the next
    holder got the lock meant the last one never released. Holds now write nothing: the
    lock's session names its process (``application_name``) and that process's
    ``gateway_processes`` row says whether it is alive (``deerflow_ext.runtime.pg_coordinator``).
    The table stays while a deployment may still run a process of an earlier release.
    """

    __tablename__ = "thread_leases"

    thread_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), nullable=False)
    owner: Mapped[str] = mapped_column(String(255), nullable=False)
    backend_pid: Mapped[int] = mapped_column(Integer, nullable=False)
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)


class GatewayProcessRow(Base):
    """One Gateway process sharing the database, alive until ``expires_at`` (PostgreSQL only).

    Each process refreshes its row every third of the lease; a row past ``expires_at`` is a
    process that died (or froze) before it could clean up: the runs it had queued but never
    started are failed by the others (``deerflow_ext.runtime.presence``), the sessions holding
    its threads' locks may be ended, and the runs it left running are interrupted
    (``deerflow_ext.runtime.pg_coordinator``).
    """

    __tablename__ = "gateway_processes"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)


CHECKPOINT_TABLES: tuple[str, ...] = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
    "writes",  # the SQLite saver's name for checkpoint writes
)
"""Tables the LangGraph checkpointer creates in the same database."""

STORE_TABLE = "store_items"
"""The LangGraph Platform store's items (``store_table``: a Core table on this metadata)."""

STORE_VECTORS_TABLE = "store_vectors"
"""The embeddings of the store's items, for semantic search (``store_table``, migration 0014)."""

ASSISTANT_TABLES: tuple[str, ...] = ("assistants", "assistant_versions")
"""Assistants and their versions (``assistant_tables``: Core tables on this metadata)."""

RUN_EVENTS_TABLE = "run_events"
"""The run journal run evidence readers page through (``run_journal``: a Core table on this metadata)."""

CRON_TABLE = "crons"
"""Scheduled runs (``cron_table``: a Core table on this metadata; ``deerflow_ext.scheduling``)."""

WEBHOOK_TABLE = "webhook_outbox"
"""Webhook deliveries owed (``webhook_table``: a Core table on this metadata; ``deerflow_ext.webhooks``)."""

HOST_TABLES: tuple[str, ...] = (
    *Base.metadata.tables,
    STORE_TABLE,
    STORE_VECTORS_TABLE,
    *ASSISTANT_TABLES,
    CRON_TABLE,
    WEBHOOK_TABLE,
    RUN_EVENTS_TABLE,
    HOST_VERSION_TABLE,
    *CHECKPOINT_TABLES,
)
"""Every table the host owns; an extension's ``table_prefix`` must not claim any of them."""
