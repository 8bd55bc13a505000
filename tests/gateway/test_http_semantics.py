"""HTTP as RFC 9110/9112 say it, against a real uvicorn (issue 54, row 14).

* ``If-Match`` (``PUT /api/extensions-config``): strong comparison, so a weak tag never
  matches; a comma-separated list matches when any of its tags does; ``*`` holds only while
  the file exists; a header that is no list of entity tags is a 400.
* A request with two ``Host`` headers is a 400 (RFC 9112 3.2), whichever route it asks for.
* An ``Origin``'s scheme and host are case-insensitive: ``http://LOCALHOST:3000`` is loopback.
* ``Last-Event-ID`` the Gateway never issued (``-999``) is answered ``not_retained`` before
  the stream, never a silent replay; ``-1`` (``useStream``'s "from the start") is not.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from gw_fixtures import FakeAgentHost

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import create_app
from gateway.conftest import read_sse

CONFIG = "/api/extensions-config"
SKILL = {"mcpServers": {}, "skills": {"s": {"enabled": True}}}


@pytest.fixture
async def served(settings_for):
    app = create_app(settings_for(), config=AppConfig(), agent_host_factory=lambda c, k: FakeAgentHost())
    async with live_server(app) as server, server.client() as http:
        yield server, http


async def test_if_match_compares_strongly_takes_lists_and_star_needs_the_file(served, tmp_path) -> None:
    _, client = served
    star = await client.put(CONFIG, json=SKILL, headers={"If-Match": "*"})
    assert star.status_code == 412, star.text  # no file yet: nothing for * to match
    assert "does not exist" in star.json()["detail"]
    assert not (tmp_path / "extensions_config.json").exists()

    etag = (await client.put(CONFIG, json=SKILL)).headers["ETag"]
    weak = await client.put(CONFIG, json=SKILL, headers={"If-Match": f"W/{etag}"})
    assert weak.status_code == 412, weak.text
    listed = await client.put(CONFIG, json=SKILL, headers={"If-Match": f'"stale", W/"weak", {etag}'})
    assert listed.status_code == 200, listed.text
    stale = await client.put(CONFIG, json=SKILL, headers={"If-Match": '"one", "two"'})
    assert stale.status_code == 412 and "one, two" in stale.json()["detail"]
    assert (await client.put(CONFIG, json=SKILL, headers={"If-Match": "*"})).status_code == 200
    for malformed in ("absent", '"open', '"a" "b"', ","):
        answer = await client.put(CONFIG, json=SKILL, headers={"If-Match": malformed})
        assert answer.status_code == 400, (malformed, answer.text)
        assert "If-Match" in answer.json()["detail"]


async def _raw(base_url: str, head: str) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 request written by hand (clients will not send two Host headers)."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.encode("latin-1"))
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body) if body else {}


@pytest.mark.parametrize("path", ["/api/threads", "/ok"])
async def test_two_host_headers_are_a_400(served, path: str) -> None:
    server, _ = served
    port = server.base_url.rsplit(":", 1)[1]
    for hosts in ([f"attacker.example:{port}", f"127.0.0.1:{port}"], [f"127.0.0.1:{port}"] * 2):
        head = f"GET {path} HTTP/1.1\r\n" + "".join(f"Host: {h}\r\n" for h in hosts) + "Connection: close\r\n\r\n"
        status, body = await _raw(server.base_url, head)
        assert status == 400, (hosts, body)
        assert "more than one Host header" in body["detail"]
    status, _ = await _raw(
        server.base_url, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    assert status == 200


async def test_an_origins_scheme_and_host_are_case_insensitive(served) -> None:
    _, client = served
    for origin in ("http://LOCALHOST:3000", "HTTP://127.0.0.1:5173", "http://LocalHost"):
        answer = await client.post("/api/threads", json={}, headers={"origin": origin})
        assert answer.status_code == 200, (origin, answer.text)
    foreign = await client.post("/api/threads", json={}, headers={"origin": "http://EVIL.example"})
    assert foreign.status_code == 403


async def test_a_last_event_id_never_issued_is_not_retained_then_the_stream(served) -> None:
    _, client = served
    thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": "hi"}]}}
    run_id = (await client.post(f"/api/threads/{thread_id}/runs/wait", json=body)).headers["content-location"]
    stream = f"{run_id}/stream"
    async with client.stream("GET", stream, headers={"Last-Event-ID": "-1"}) as response:
        whole = [name for name, _, _ in await read_sse(response)]
    assert whole[0] == "metadata" and whole[-1] == "end" and "not_retained" not in whole
    for cursor in ("-999", "-" + "9" * 30):
        async with client.stream("GET", stream, headers={"Last-Event-ID": cursor}) as response:
            events = await read_sse(response)
        assert events[0][0] == "not_retained", cursor
        assert events[0][1]["last_event_id"] == cursor and events[0][1]["resume_after"] == "0"
        assert [name for name, _, _ in events[1:]] == whole
