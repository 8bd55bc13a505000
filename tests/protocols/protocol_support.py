"""A Gateway on a real uvicorn for the agent-protocol tests: built as ``serve`` builds it
(real agent host on the embedded model, the database the suite hands out), with the
``config.yaml`` the test writes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from live_uvicorn import LiveServer, live_server

__all__ = ["TOKEN", "gateway"]

TOKEN = "protocol-test-token-0123456789"


@contextlib.asynccontextmanager
async def gateway(directory: Path, database_url: str, **config: Any) -> AsyncIterator[LiveServer]:
    from deerflow_ext.config.loading import load_app_config
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions
    from deerflow_ext.gateway import create_app

    path = directory / "config.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    previous = get_loaded_extensions()
    app = create_app(Settings(config=path, database_url=database_url), config=load_app_config(path))
    try:
        async with live_server(app, start_timeout=30) as served:
            yield served
    finally:
        set_loaded_extensions(previous)
