"""Hypothesis over HTTP bodies against a live Gateway.

Bodies mix what the door must refuse with what it must serve: text with lone surrogates
and NULs (as JSON escapes, the way a client can send them), JSON nested to any depth,
fields around the size limits, and numbers at the edges (64-bit bounds and beyond, ``NaN``
and ``Infinity`` literals, tiny and huge floats). They go to every writable LangGraph route.
Whatever arrives: never a 5xx, every refusal one JSON ``detail`` sentence, and at the end
every run the Gateway accepted has ended and no thread is busy.

Bounded for CI: derandomized, a modest number of examples per route, small limits so the
size edges are cheap to reach.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fuzz_support import FuzzGateway, check_answer, fuzz_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LIMITS = {"max_body_bytes": 96 * 1024, "max_messages": 20, "max_message_bytes": 8192, "max_field_bytes": 4096}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

EDGE_INTS = [0, -1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**40]
EDGE_FLOATS = [0.0, -0.0, 5e-324, 1.7976931348623157e308, float("nan"), float("inf"), float("-inf"), 1e-310]
NASTY = ["\ud800", "\udfff", "\ud83d", "\x00", "a\x00b", "\ufeff", "\u202e", "\U0010ffff", "\r\n", "😀"]

TEXT = st.one_of(
    st.text(max_size=30),
    st.text(st.characters(categories=["Cs", "Cc", "Co", "Lo"]), max_size=8),
    st.sampled_from(NASTY),
    st.lists(st.sampled_from(NASTY) | st.text(max_size=4), max_size=5).map("".join),
    st.sampled_from([4000, 4096, 5000, 9000]).map(lambda n: "x" * n),
)
NUMBERS = st.one_of(
    st.sampled_from(EDGE_INTS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(EDGE_FLOATS),
    st.floats(),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)


def _nested(depth: int, leaf: Any) -> Any:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


DEEP = st.builds(_nested, st.sampled_from([1, 30, 63, 64, 65, 127, 128, 200, 900]), SCALARS)
VALUE = st.one_of(JSON, DEEP)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "human", "assistant", "system"]), "content": st.one_of(TEXT, DEEP, JSON)},
    optional={"id": TEXT, "name": TEXT, "additional_kwargs": VALUE},
)
RUN = st.fixed_dictionaries(
    {"input": st.fixed_dictionaries({"messages": st.lists(MESSAGE, min_size=1, max_size=3)})},
    optional={
        "metadata": st.dictionaries(TEXT, VALUE, max_size=3),
        "context": st.dictionaries(TEXT, VALUE, max_size=3),
        "config": st.fixed_dictionaries(
            {},
            optional={
                "configurable": st.dictionaries(TEXT, VALUE, max_size=2),
                "recursion_limit": NUMBERS,
                "tags": st.lists(TEXT, max_size=2),
            },
        ),
        "goal": TEXT,
        "after_seconds": st.sampled_from([0, 0.01, -1, 2**63, float("nan"), float("inf")]),
    },
)
MANY = st.integers(min_value=19, max_value=22).map(
    lambda n: {"input": {"messages": [{"role": "user", "content": "m"}] * n}}
)
THREAD = st.fixed_dictionaries({}, optional={"metadata": st.dictionaries(TEXT, VALUE, max_size=3), "thread_id": TEXT})
SEARCH = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.dictionaries(TEXT, VALUE, max_size=2),
        "limit": NUMBERS,
        "offset": NUMBERS,
        "ids": st.lists(TEXT, max_size=2),
    },
)


def _encode(body: Any) -> bytes:
    """JSON text as a client sends it: ``\\ud800`` escapes, ``NaN``/``Infinity`` literals."""
    return json.dumps(body).encode()


def _post(gateway: FuzzGateway, method: str, path: str, body: Any) -> httpx.Response:
    content = _encode(body)
    response = gateway.client.request(method, path, content=content, headers={"content-type": "application/json"})
    check_answer(response)
    return response


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzGateway]:
    with fuzz_gateway(tmp_path_factory.mktemp("http-fuzz"), gateway={"limits": LIMITS}) as running:
        yield running


@pytest.fixture(scope="module")
def thread_id(gateway: FuzzGateway) -> str:
    return str(gateway.client.post("/api/threads", json={}).json()["thread_id"])


def test_run_bodies(gateway: FuzzGateway, thread_id: str) -> None:
    accepted: list[str] = []

    @SETTINGS
    @given(body=st.one_of(RUN, MANY))
    def check(body: dict[str, Any]) -> None:
        response = _post(gateway, "POST", f"/api/threads/{thread_id}/runs", {**body, "multitask_strategy": "enqueue"})
        if response.status_code == 200:
            accepted.append(response.json()["run_id"])

    check()
    assert accepted, "no generated run was valid: the suite would not see a run end"
    assert gateway.assert_settled() >= len(accepted)


def test_thread_bodies(gateway: FuzzGateway, thread_id: str) -> None:
    @SETTINGS
    @given(create=THREAD, patch=st.dictionaries(TEXT, VALUE, max_size=3), search=SEARCH)
    def check(create: dict[str, Any], patch: dict[str, Any], search: dict[str, Any]) -> None:
        _post(gateway, "POST", "/api/threads", create)
        _post(gateway, "PATCH", f"/api/threads/{thread_id}", {"metadata": patch})
        _post(gateway, "POST", "/api/threads/search", search)
        _post(gateway, "POST", "/api/threads/count", {"metadata": search.get("metadata", {})})

    check()
    # Whatever was stored is listed: no row breaks the listing for everyone.
    listed = gateway.client.get("/api/threads?limit=1000")
    searched = gateway.client.post("/api/threads/search", json={"limit": 1000})
    for response in (listed, searched):
        check_answer(response)
        assert response.status_code == 200
    gateway.assert_settled()


def test_state_and_config_bodies(gateway: FuzzGateway, thread_id: str) -> None:
    @SETTINGS
    @given(values=st.dictionaries(TEXT, VALUE, max_size=2), servers=st.dictionaries(TEXT, VALUE, max_size=2))
    def check(values: dict[str, Any], servers: dict[str, Any]) -> None:
        _post(gateway, "POST", f"/api/threads/{thread_id}/state", {"values": values})
        _post(gateway, "POST", f"/api/threads/{thread_id}/history", {"limit": 3, "metadata": values})
        _post(gateway, "PUT", "/api/extensions-config", {"mcpServers": servers})

    check()
    check_answer(gateway.client.get(f"/api/threads/{thread_id}/state"))
    check_answer(gateway.client.get("/api/extensions-config"))
