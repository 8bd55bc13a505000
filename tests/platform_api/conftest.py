"""The LangGraph Platform suite: each case drives a server with ``langgraph_sdk``, sync and async.

The same cases run against three servers, so a divergence from LangGraph shows as a failing
case rather than as a surprise to a user:

- ``sqlite`` and ``postgres``: our Gateway on a real uvicorn (``sdk_server``), built as
  ``deerflow-ext serve`` builds it, on a database of its own (PostgreSQL's is skipped, saying
  why, when the server does not answer);
- ``peer``: LangGraph's own server, when ``DEERFLOW_COMPAT_URL`` names one (``nox -s compat``
  starts ``langgraph dev`` on the peer graph and sets it). Then only the peer runs.

A case that needs something only ours has (a restart, the database) asks for ``ours``; a case
that only makes sense on ours is skipped on the peer by it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client
from platform_support import COMPAT_URL, PLUGINS, Platform

from gateway.sdk_server import SdkServer, sdk_server
from pg_support import PG_UNREACHABLE, fresh_database


def _params() -> list[Any]:
    if COMPAT_URL:
        return ["peer"]
    return ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=_params())
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    if request.param == "peer":
        assert COMPAT_URL is not None
        yield Platform("peer", COMPAT_URL.rstrip("/"))
        return
    directory: Path = tmp_path_factory.mktemp(f"platform-{request.param}")
    if request.param == "sqlite":
        with sdk_server(directory, plugins=PLUGINS, sse_heartbeat_seconds=0.5) as served:
            yield Platform("sqlite", served.url, served)
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
        with sdk_server(directory, database_url=url, plugins=PLUGINS, sse_heartbeat_seconds=0.5) as served:
            yield Platform("postgres", served.url, served)


@pytest.fixture
def ours(platform: Platform) -> SdkServer:
    """The Gateway behind ``platform``; the case is skipped on the peer."""
    if platform.served is None:
        pytest.skip("needs our Gateway (not LangGraph's server)")
    return platform.served


@pytest.fixture
def client(platform: Platform) -> Any:
    return get_sync_client(url=platform.url, api_key=None)


@pytest.fixture
def aclient(platform: Platform) -> Any:
    return get_client(url=platform.url, api_key=None)
