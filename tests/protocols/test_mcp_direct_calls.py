"""``protocols/mcp_calls.py``: which MCP requests the endpoint answers itself, and that its
answer is the one the ``mcp`` SDK writes for the same call, byte for byte (real uvicorn; a
call that names a progress token but accepts JSON alone is the SDK's to answer, and gets the
same result). When the SDK changes the shape of its answers, this fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from protocol_support import TOKEN, gateway

from deerflow_ext.protocols.mcp_calls import PlainCall, plain_call

_AUTH = {"Authorization": f"Bearer {TOKEN}"}
_PLAIN_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}
_HELLO = {"messages": [{"role": "user", "content": "hello there"}]}


def _scope(headers: dict[str, str]) -> dict[str, Any]:
    encoded = [(key.lower().encode(), value.encode()) for key, value in headers.items()]
    return {"type": "http", "method": "POST", "path": "/api/mcp", "headers": encoded}


def _body(params: dict[str, Any], **extra: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params, **extra}).encode()


def test_a_plain_call_is_taken_with_its_id_tool_and_arguments() -> None:
    call = plain_call(_scope(_PLAIN_HEADERS), _body({"name": "lead_agent", "arguments": _HELLO, "_meta": {}}))
    assert call == PlainCall(request_id=3, name="lead_agent", arguments=_HELLO)
    # No protocol version header: the SDK assumes its default, which it speaks.
    headers = {key: value for key, value in _PLAIN_HEADERS.items() if key != "MCP-Protocol-Version"}
    assert plain_call(_scope(headers), _body({"name": "x"})) == PlainCall(request_id=3, name="x", arguments=None)


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        pytest.param({"Accept": "text/event-stream"}, _body({"name": "x"}), id="json-not-accepted"),
        pytest.param({"Content-Type": "text/plain"}, _body({"name": "x"}), id="not-json"),
        pytest.param({"Content-Type": "text/plain, application/json"}, _body({"name": "x"}), id="json-second"),
        pytest.param({"Content-Type": "Application/JSON"}, _body({"name": "x"}), id="json-in-capitals"),
        pytest.param({"MCP-Protocol-Version": "1999-01-01"}, _body({"name": "x"}), id="unknown-version"),
        pytest.param({}, b"{not json", id="unparsable"),
        pytest.param({}, b"[" + _body({"name": "x"}) + b"]", id="batch"),
        pytest.param({}, _body({"name": "x", "_meta": {"progressToken": 1}}), id="asks-progress"),
        pytest.param({}, _body({"name": "x", "task": {"ttl": 1000}}), id="asks-a-task"),
        pytest.param({}, _body({"arguments": {}}), id="no-tool-name"),
        pytest.param({}, _body({"name": "x"}, jsonrpc="1.0"), id="not-json-rpc-2"),
        pytest.param({}, json.dumps({"jsonrpc": "2.0", "method": "tools/call"}).encode(), id="notification"),
        pytest.param({}, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(), id="tools-list"),
    ],
)
def test_every_other_request_is_left_to_the_sdk(headers: dict[str, str], body: bytes) -> None:
    assert plain_call(_scope({**_PLAIN_HEADERS, **headers}), body) is None


async def _post(http: httpx.AsyncClient, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return await http.post("/api/mcp", content=body, headers={**_AUTH, **headers})


async def test_the_answer_is_the_one_the_sdk_writes(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url, gateway={"api_token": TOKEN}) as served, served.client() as http:
        cases = {
            "answered": {"name": "lead_agent", "arguments": _HELLO},
            "no such tool": {"name": "nobody", "arguments": _HELLO},
            "bad messages": {"name": "lead_agent", "arguments": {"messages": 7}},
            "question alone": {"name": "lead_agent", "arguments": {"messages": "hello there"}},
        }
        sdk_headers = {**_PLAIN_HEADERS, "Accept": "application/json"}
        for case, params in cases.items():
            ours = await _post(http, _body(params), _PLAIN_HEADERS)
            sdks = await _post(http, _body({**params, "_meta": {"progressToken": "p"}}), sdk_headers)
            assert (ours.status_code, ours.headers["content-type"]) == (200, "application/json"), case
            assert (sdks.status_code, sdks.headers["content-type"]) == (200, "application/json"), case
            assert ours.content == sdks.content, case
        assert json.loads(ours.content)["result"]["content"][0]["text"].endswith("hello there")


async def test_requests_the_sdk_refuses_keep_its_answers(tmp_path: Path, database_url: str) -> None:
    async with gateway(tmp_path, database_url, gateway={"api_token": TOKEN}) as served, served.client() as http:
        call = _body({"name": "lead_agent", "arguments": _HELLO})
        refused = {
            "Unsupported protocol version": (call, {"MCP-Protocol-Version": "1999-01-01"}, 400),
            "Invalid Content-Type header": (call, {"Content-Type": "text/plain"}, 400),
            "Content-Type must be application/json": (call, {"Content-Type": "Application/JSON"}, 415),
            "Client must accept application/json": (call, {"Accept": "text/html"}, 406),
            "Parse error": (b"{not json", {}, 400),
        }
        for text, (body, headers, status) in refused.items():
            answer = await _post(http, body, {**_PLAIN_HEADERS, **headers})
            assert (answer.status_code, text in answer.text) == (status, True), answer.text
