"""Malformed HTTP bodies against the run routes (and the other writable routes).

Hypothesis generates JSON documents (valid JSON of every shape, and near-misses of a run
body) and raw bytes (mostly not JSON, not UTF-8). Whatever arrives, the Gateway answers a
4xx with a JSON ``{"detail": ...}`` — never a 5xx, never a non-JSON error — unless the body
happens to be valid, in which case it is served normally.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fuzz_support import check_answer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ThreadedServer, make_settings

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "ai", "tool", "", 3]), "content": JSON},
    optional={"extra": JSON},
)
NEAR_RUN = st.fixed_dictionaries(
    {"input": st.one_of(JSON, st.fixed_dictionaries({"messages": st.one_of(JSON, st.lists(MESSAGE, max_size=3))}))},
    optional={"goal": JSON, "context": JSON, "gaol": JSON},
)
BODIES = st.one_of(
    JSON.map(lambda v: ("json", v)),
    NEAR_RUN.map(lambda v: ("json", v)),
    st.binary(max_size=200).map(lambda v: ("raw", v)),
    st.text(max_size=80).map(lambda v: ("raw", v.encode())),
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions
    from deerflow_ext.gateway import create_app

    saved = get_loaded_extensions()
    tmp: Path = tmp_path_factory.mktemp("bad-input")
    server = ThreadedServer(create_app(make_settings(tmp, [])))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            thread_id = client.post("/api/threads", json={}).json()["thread_id"]
            yield client, thread_id
    finally:
        server.close()
        set_loaded_extensions(saved)


def _send(client: httpx.Client, method: str, path: str, body: tuple[str, Any]) -> httpx.Response:
    kind, value = body
    if kind == "json":
        return client.request(method, path, json=value)
    return client.request(method, path, content=value, headers={"content-type": "application/json"})


@pytest.mark.parametrize("route", ["runs", "runs/stream"])
def test_run_routes_reject_malformed_bodies(gateway: tuple[httpx.Client, str], route: str) -> None:
    client, thread_id = gateway

    @SETTINGS
    @given(body=BODIES)
    def check(body: tuple[str, Any]) -> None:
        check_answer(_send(client, "POST", f"/api/threads/{thread_id}/{route}", body))

    check()


@pytest.mark.parametrize(("method", "path"), [("POST", "/api/threads"), ("PUT", "/api/extensions-config")])
def test_other_writable_routes_reject_malformed_bodies(
    gateway: tuple[httpx.Client, str], method: str, path: str
) -> None:
    client, _ = gateway

    @SETTINGS
    @given(body=BODIES)
    def check(body: tuple[str, Any]) -> None:
        check_answer(_send(client, method, path, body))

    check()


@pytest.mark.parametrize("path", ["/api/threads/{t}/runs/not-a-run", "/api/threads/nope/runs", "/api/nowhere"])
def test_unknown_resources_are_json_404(gateway: tuple[httpx.Client, str], path: str) -> None:
    client, thread_id = gateway
    response = client.get(path.format(t=thread_id))
    assert response.status_code == 404
    assert response.json()["detail"]
