"""Schemathesis over every route of the Gateway's own OpenAPI document.

The document is read from the running Gateway (``/openapi.json``), so a route added later is
fuzzed without touching this file. For every operation, cases that follow the schema
(positive) and cases that break it (negative) go to a live ``deerflow-ext serve``: never a
5xx, every error a JSON ``detail``; at the end every run the fuzzing started has ended and
no thread is busy.

Bounded for CI: derandomized, a handful of examples per operation and mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from fuzz_support import FuzzGateway, fuzz_gateway
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

EXAMPLES = 5
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzGateway]:
    with fuzz_gateway(tmp_path_factory.mktemp("openapi-fuzz")) as running:
        yield running


def _tame(case: Any) -> None:
    """Steer schema-valid run bodies towards runs that start: the one assistant there is, no
    fork from a checkpoint that cannot exist, and a short delay (a run delayed for a day is
    legal but would still be pending when the suite checks that every run ended)."""
    body = case.body
    if not isinstance(body, dict):
        return
    if isinstance(body.get("after_seconds"), int | float) and body["after_seconds"] > 0.5:
        body["after_seconds"] = 0.1
    if "assistant_id" in body and case.path.endswith(RUN_CREATING):
        body["assistant_id"] = "lead_agent"
        if isinstance(body.get("input"), dict):
            body.pop("checkpoint", None)
            body.pop("checkpoint_id", None)


RUN_CREATING = ("/runs", "/runs/stream", "/runs/wait")
PLAIN_RUN = {"input": {"messages": [{"role": "user", "content": "hello"}]}}


def _content_type(response: Any) -> str:
    """Schemathesis' response keeps each header as a list of values."""
    values = {name.lower(): value for name, value in response.headers.items()}.get("content-type", [""])
    return str(values[0] if isinstance(values, list) else values)


def _call(gateway: FuzzGateway, session: requests.Session, case: Any, seen: dict[int, int]) -> None:
    _tame(case)
    try:
        response = case.call(base_url=gateway.url, session=session, timeout=60)
    except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, UnicodeError):
        reject()  # the client cannot send it; nothing reached the Gateway
    seen[response.status_code] = seen.get(response.status_code, 0) + 1
    where = f"{case.method} {case.formatted_path}"
    assert response.status_code < 500, (where, response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert _content_type(response).startswith("application/json"), (where, response.text[:200])
        assert response.json()["detail"], (where, response.text[:200])


def _fuzz(gateway: FuzzGateway, session: requests.Session, operation: Any, mode: Any, seen: dict[int, int]) -> None:
    # Schema-valid cases address a real thread (made for this operation: one of them may
    # delete it), so runs get created, streamed, joined and cancelled for real.
    pinned = None
    if mode is GenerationMode.POSITIVE and "{thread_id}" in operation.path:
        pinned = {"thread_id": gateway.client.post("/api/threads", json={}).json()["thread_id"]}

    if pinned is not None and operation.method.upper() == "POST" and operation.path.endswith(RUN_CREATING):
        # One plain run first, through the same operation: every fuzzed run comes after it.
        plain = operation.Case(path_parameters=pinned, body=PLAIN_RUN, media_type="application/json")
        _call(gateway, session, plain, seen)

    @SETTINGS
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=pinned))
    def check(case: Any) -> None:
        _call(gateway, session, case, seen)

    try:
        check()
    except Unsatisfiable:
        # Nothing about this operation can be broken (no parameters, no body).
        assert mode is GenerationMode.NEGATIVE, f"{operation.method.upper()} {operation.path}"


def test_every_route_of_the_openapi_document(gateway: FuzzGateway) -> None:
    schema = schemathesis.openapi.from_url(f"{gateway.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    paths = {operation.path for operation in operations}
    assert {"/api/threads", "/api/threads/{thread_id}/runs/stream", "/api/extensions-config", "/metrics"} <= paths
    session = requests.Session()
    seen: dict[int, int] = {}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(gateway, session, operation, mode, seen)
    assert any(200 <= status < 300 for status in seen), seen  # positive cases did get served
    assert any(400 <= status < 500 for status in seen), seen
    assert gateway.assert_settled() >= len(RUN_CREATING)  # the runs the fuzzing started all ended
