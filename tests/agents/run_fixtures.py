"""An extension for the ``deerflow-ext run`` tests, loaded as ``agents.run_fixtures:install_logging_timer``."""

from __future__ import annotations

import logging
from typing import Any

from deerflow_extension_api import TaskInfo


class LoggingTimer:
    """Logs on its own logger, as an observer extension does: ``run`` must show the line."""

    async def on_task_start(self, app_store: Any, task_store: Any, info: TaskInfo) -> None:
        logging.getLogger("acme.timer").info("task %s started", info.kind)


def install_logging_timer(registry: Any, config: Any) -> None:
    registry.task_lifecycle(LoggingTimer())
