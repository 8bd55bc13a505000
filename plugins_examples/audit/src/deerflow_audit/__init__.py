"""A mandatory audit trail: one database row per task outcome, in tables this package owns.

Enable it with ``required: true`` (a deployment that must audit should not start without
its audit trail) and ``table_prefix: audit_`` (so the host's own migrations never
propose to drop these tables)::

    plugins:
      - name: audit
        use: audit
        required: true
        table_prefix: audit_

The pieces follow the spec's advice to keep I/O out of hooks: :class:`AuditTrail` only
buffers outcomes in the app store, :class:`AuditWriter` (a Gateway service) runs this
package's own alembic chain at start and writes the buffer from its own task, and the
router reads the rows back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import ExtensionRegistry, extension

from .buffer import AuditBuffer, OutcomeRecord
from .lifecycle import AuditTrail
from .migrate import VERSION_TABLE, upgrade
from .routes import make_router
from .schema import TABLE_PREFIX, metadata, task_outcomes
from .service import AuditSettings, AuditWriter

__all__ = [
    "TABLE_PREFIX",
    "VERSION_TABLE",
    "AuditBuffer",
    "AuditSettings",
    "AuditTrail",
    "AuditWriter",
    "OutcomeRecord",
    "install",
    "make_router",
    "metadata",
    "task_outcomes",
    "upgrade",
]


@extension(api="0.2.0", name="audit")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register the buffering lifecycle contributor, the writer service and the read-only router.

    Settings are validated before anything is registered, so a bad config fails the
    install cleanly (and, with ``required: true``, stops the Gateway with the reason).
    """
    settings = AuditSettings.from_config(config)
    writer = AuditWriter(settings)
    registry.task_lifecycle(AuditTrail())
    registry.service(writer)
    registry.routers([make_router(writer)])
