"""Host persistence: threads and runs (SQLAlchemy 2 async), migrations, the checkpointer."""

from .assistant_tables import ASSISTANT_VERSIONS, ASSISTANTS  # on Base.metadata, as the store's
from .checkpointer import open_checkpointer, psycopg_conninfo
from .cron_table import CRONS  # on Base.metadata, as the scheduler's
from .engine import (
    DEFAULT_DATABASE_URL,
    SessionFactory,
    create_engine,
    is_sqlite,
    make_session_factory,
    normalize_database_url,
)
from .migrate import MIGRATIONS_DIR, alembic_config, host_include_object, upgrade_head
from .models import (
    HOST_TABLES,
    HOST_VERSION_TABLE,
    Base,
    RunOutcome,
    RunRow,
    RunStatus,
    ThreadRow,
    ThreadStatus,
)
from .records import PROCESS_OWNER, HostStore, RunRecord, ThreadNotFoundError, ThreadRecord, owner_is_dead
from .run_events_table import RUN_EVENTS  # on Base.metadata, as the run journal's
from .store_table import STORE_ITEMS  # on Base.metadata wherever the host's tables are
from .webhook_table import WEBHOOK_OUTBOX  # on Base.metadata, as the webhook worker's

__all__ = [
    "ASSISTANTS",
    "ASSISTANT_VERSIONS",
    "CRONS",
    "DEFAULT_DATABASE_URL",
    "HOST_TABLES",
    "HOST_VERSION_TABLE",
    "MIGRATIONS_DIR",
    "PROCESS_OWNER",
    "RUN_EVENTS",
    "STORE_ITEMS",
    "WEBHOOK_OUTBOX",
    "Base",
    "HostStore",
    "RunOutcome",
    "RunRecord",
    "RunRow",
    "RunStatus",
    "SessionFactory",
    "ThreadNotFoundError",
    "ThreadRecord",
    "ThreadRow",
    "ThreadStatus",
    "alembic_config",
    "create_engine",
    "host_include_object",
    "is_sqlite",
    "make_session_factory",
    "normalize_database_url",
    "open_checkpointer",
    "owner_is_dead",
    "psycopg_conninfo",
    "upgrade_head",
]
