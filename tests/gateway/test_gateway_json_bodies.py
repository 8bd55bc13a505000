"""Bodies sent without a JSON content type: read as JSON for a proxy, refused for a browser.

``langgraph-nextjs-api-passthrough`` (agent-chat-ui's production setup) forwards each call
server-side with the body but not its ``Content-Type``, so the Gateway receives
``text/plain`` and no ``Origin``; that is what these requests imitate. A browser always sends
``Origin`` on a POST, and a ``text/plain`` POST is the one a cross-site page can send
without a preflight: that one must still be refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sdk_server import SdkServer, sdk_server

pytestmark = pytest.mark.e2e

AS_A_PROXY_SENDS = {"content-type": "text/plain;charset=UTF-8"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with sdk_server(tmp_path_factory.mktemp("bodies")) as running:
        yield running.url.removesuffix("/api")


def send(root: str, method: str, path: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.request(method, root + path, content=json.dumps(body), headers={**AS_A_PROXY_SENDS, **headers})


def test_a_proxy_that_drops_the_content_type_reaches_the_langgraph_routes(root: str) -> None:
    tag = SdkServer.gate()
    made = send(root, "POST", "/api/threads", {"metadata": {"via": tag}})
    assert made.status_code == 200, made.text
    thread_id = made.json()["thread_id"]
    assert send(root, "PATCH", f"/api/threads/{thread_id}", {"metadata": {"more": 1}}).status_code == 200
    found = send(root, "POST", "/api/threads/search", {"metadata": {"via": tag}}).json()
    assert [t["thread_id"] for t in found] == [thread_id] and found[0]["metadata"]["more"] == 1
    assert send(root, "POST", "/api/assistants/search", {}).json()[0]["assistant_id"] == "lead_agent"

    run = {"input": {"messages": [{"type": "human", "content": "hello"}]}, "stream_mode": ["values"]}
    with httpx.stream(
        "POST", f"{root}/api/threads/{thread_id}/runs/stream", content=json.dumps(run), headers=AS_A_PROXY_SENDS
    ) as response:
        assert response.status_code == 200
        events = [line.removeprefix("event: ") for line in response.iter_lines() if line.startswith("event: ")]
    assert events[0] == "metadata" and events[-1] == "end" and "values" in events


@pytest.mark.parametrize(("origin", "status"), [("http://evil.example", 403), ("http://localhost:3000", 422)])
def test_a_browsers_text_plain_body_is_still_refused(root: str, origin: str, status: int) -> None:
    """A foreign origin is refused as cross-site (gateway/access.py); an allowed one's
    text/plain body is still not read as JSON."""
    tag = SdkServer.gate()
    refused = send(root, "POST", "/api/threads", {"metadata": {"via": tag}}, origin=origin)
    assert refused.status_code == status
    assert send(root, "POST", "/api/threads/search", {"metadata": {"via": tag}}).json() == []


def test_routes_outside_the_langgraph_api_keep_their_content_types(root: str) -> None:
    assert send(root, "PUT", "/api/extensions-config", {"mcpServers": {}, "skills": {}}).status_code == 422
