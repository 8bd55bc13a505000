"""Gateway suite fixtures: a real uvicorn on 127.0.0.1 with a free port (``database_url``, a
database per test, is the whole suite's: ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gw_fixtures
import httpx
import pytest

from live_uvicorn import LiveServer, free_port, live_server

__all__ = ["LiveServer", "free_port", "live_server", "read_sse"]


@pytest.fixture(autouse=True)
def _clear_events() -> Iterator[None]:
    gw_fixtures.EVENTS.clear()
    yield
    gw_fixtures.EVENTS.clear()


@pytest.fixture
def settings_for(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    from deerflow_ext.config.settings import Settings

    monkeypatch.chdir(tmp_path)

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"config": tmp_path / "config.yaml", "database_url": database_url}
        values.update(overrides)
        return Settings(**values)

    return make


async def read_sse(response: httpx.Response) -> list[tuple[str, Any, float]]:
    """(event, data, monotonic arrival time) for each SSE event of ``response``."""
    import json
    import time

    events: list[tuple[str, Any, float]] = []
    name, data = None, []
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and name is not None:
            events.append((name, json.loads("\n".join(data)), time.monotonic()))
            name, data = None, []
    return events
