"""What a request may carry, against a real Gateway.

* Text no database stores — a lone surrogate, a NUL — and ``NaN``/``Infinity`` are refused
  with 422 naming the field, wherever they appear (content, metadata, context, a key);
  nothing is stored or run.
* A completion the database refuses still ends the run: terminal status, thread not busy,
  the run list answers (SQLite and PostgreSQL).
* JSON nested past ``gateway.limits.max_json_depth`` is refused; a deep row already in the
  database does not make ``GET /api/threads`` or thread search fail for everyone.
* Body size (413, unread: by ``Content-Length`` and while a chunked body streams in),
  message count and size, and field size (422) follow ``gateway.limits``.
* Query parameters out of range are 422; an unexpected error is a JSON 500 on a
  connection that stays open for the next request.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import live_server, make_settings, new_thread, run_body, sqlite_url, wait_run

UNSAVABLE = {"name": "unsavable", "use": "unsavable_ext:install", "intercept": True}
ROUTED = {"name": "routed", "use": "routed_ext:install"}


def _raw_json(value: Any) -> dict[str, Any]:
    """``json.dumps`` escapes a lone surrogate as ``\\ud800``: valid JSON text a client can send."""
    return {"content": json.dumps(value).encode(), "headers": {"content-type": "application/json"}}


def _deep(levels: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    cursor = doc
    for _ in range(levels):
        cursor["a"] = {}
        cursor = cursor["a"]
    return doc


async def _refused(response: httpx.Response, status: int, *words: str) -> str:
    assert response.status_code == status, (response.status_code, response.text[:300])
    detail = response.json()["detail"]
    for word in words:
        assert word in detail, detail
    return str(detail)


async def _no_runs(client: httpx.AsyncClient, thread_id: str) -> None:
    runs = await client.get(f"/api/threads/{thread_id}/runs")
    assert runs.status_code == 200 and runs.json() == [], runs.text[:300]


# -- item 3: text the databases cannot store ------------------------------------------------


@pytest.mark.parametrize("bad", ["\ud800", "\x00", "\udfff tail"])
async def test_unstorable_text_is_refused_at_the_door(tmp_path: Path, database_url: str, bad: str) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [], database_url=database_url))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        runs = f"/api/threads/{thread_id}/runs"
        cases = [
            ("POST", runs, run_body(f"hi {bad}"), "input.messages.0.content"),
            ("POST", f"{runs}/stream", run_body("hi", metadata={"note": bad}), "metadata.note"),
            ("POST", f"{runs}/wait", run_body("hi", context={"k": [1, bad]}), "context.k.1"),
            ("POST", runs, run_body("hi", config={"configurable": {bad: 1}}), "config.configurable"),
            (
                "POST",
                runs,
                {"input": {"messages": [{"role": "user", "content": [{"type": "text", "text": bad}]}]}},
                "input.messages.0.content.0.text",
            ),
            ("POST", "/api/threads", {"metadata": {"title": bad}}, "metadata.title"),
            ("PATCH", f"/api/threads/{thread_id}", {"metadata": {"x": {"y": bad}}}, "metadata.x.y"),
            ("POST", "/api/threads/search", {"metadata": {"x": bad}}, "metadata.x"),
        ]
        for method, path, body, field in cases:
            response = await client.request(method, path, **_raw_json(body))
            await _refused(response, 422, field)
        # Parameters reach SQL too (a URL cannot carry a lone surrogate; a NUL it can).
        await _refused(await client.get("/api/threads/nul%00"), 422, "thread_id", "NUL")
        await _refused(await client.get(f"{runs}?select=x%00"), 422, "select", "NUL")
        # Not JSON numbers, though Python's parser takes them.
        for literal in (b"NaN", b"Infinity", b"-Infinity"):
            body = b'{"input": {"messages": [{"role": "user", "content": "x"}]}, "metadata": {"n": ' + literal + b"}}"
            response = await client.post(runs, content=body, headers={"content-type": "application/json"})
            await _refused(response, 422, "metadata.n", "not a JSON number")
        await _no_runs(client, thread_id)
        thread = (await client.get(f"/api/threads/{thread_id}")).json()
        assert thread["status"] == "idle", thread


async def test_a_completion_the_database_refuses_still_ends_the_run(tmp_path: Path, database_url: str) -> None:
    """The model's answer holds a lone surrogate and a NUL: saving the completion fails; the
    run is saved without it, terminal, and its thread is free for the next run."""
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [UNSAVABLE], database_url=database_url))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        created = await client.post(f"/api/threads/{thread_id}/runs", json=run_body("hello"))
        assert created.status_code == 200, created.text
        row = await wait_run(client, thread_id, created.json()["run_id"])
        assert row["status"] in ("success", "error"), row
        assert "could not be saved" in (row["error"] or ""), row
        listed = await client.get(f"/api/threads/{thread_id}/runs")
        assert listed.status_code == 200 and [r["run_id"] for r in listed.json()] == [row["run_id"]], listed.text
        thread = (await client.get(f"/api/threads/{thread_id}")).json()
        assert thread["status"] != "busy", thread
        assert (await client.get("/api/threads")).status_code == 200


async def test_a_response_holding_a_lone_surrogate_is_escaped_json(tmp_path: Path) -> None:
    """An extension's route answers text UTF-8 cannot encode: \\u escapes, not a 500."""
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [ROUTED]))
    async with live_server(app) as live, live.client() as client:
        response = await client.get("/ext/odd")
        assert response.status_code == 200, response.text
        assert b"\\ud800" in response.content and json.loads(response.content) == {"text": "half a pair: \ud800"}


# -- item 4: nesting depth ------------------------------------------------------------------


async def test_deep_json_is_refused_and_a_deep_row_does_not_break_listings(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, []))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        runs = f"/api/threads/{thread_id}/runs"
        for body, field in [
            ({"metadata": _deep(900)}, "metadata"),
            (run_body("hi", context=_deep(100)), "context"),
            (run_body("hi", config={"configurable": _deep(70)}), "config.configurable"),
            ({"input": {"messages": [{"role": "user", "content": [_deep(80)]}]}}, "input.messages.0.content"),
        ]:
            path = "/api/threads" if "metadata" in body else runs
            await _refused(await client.post(path, json=body), 422, field, "nested deeper than 64")
        # Deeper than json itself parses: still a 422, not a 500.
        text = b'{"metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        response = await client.post("/api/threads", content=text, headers={"content-type": "application/json"})
        await _refused(response, 422, "nested")
        await _no_runs(client, thread_id)

        # A row written before the door bounded depth (here through the store itself).
        deep_thread = await new_thread(client)
        await app.state.runtime.store.update_thread_metadata(deep_thread, {"deep": _deep(900)})
        for response in (await client.get("/api/threads"), await client.post("/api/threads/search", json={})):
            assert response.status_code == 200, response.text[:300]
            shown = {t["thread_id"]: t["metadata"] for t in response.json()}
            assert set(shown) == {thread_id, deep_thread}
            assert "cannot be shown" in shown[deep_thread]["unreadable"], shown[deep_thread]
        single = await client.get(f"/api/threads/{deep_thread}")
        assert single.status_code == 200 and "unreadable" in single.json()["metadata"]


# -- item 7: request limits -----------------------------------------------------------------

LIMITS = {"max_body_bytes": 64 * 1024, "max_messages": 5, "max_message_bytes": 2048, "max_field_bytes": 1024}


def _head(path: str, framing: str) -> str:
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"


def _raw_request(port: int, head: str, chunks: list[bytes], *, finish: bool) -> bytes:
    """Send a request by hand and read the answer; with ``finish`` False the body is never
    completed, so an answer proves the server did not wait for (or buffer) all of it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        for chunk in chunks:
            sock.sendall(chunk)
        if finish:
            sock.sendall(b"0\r\n\r\n")
        answer = b""
        deadline = time.monotonic() + 10
        while b"\r\n\r\n" not in answer and time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
        return answer


async def test_request_limits_from_config(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, [], gateway={"limits": LIMITS}))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        runs = f"/api/threads/{thread_id}/runs"
        port = int(live.base_url.rsplit(":", 1)[1])

        too_big = run_body("x" * (70 * 1024))
        await _refused(await client.post(runs, json=too_big), 413, "max_body_bytes")
        # A declared length over the limit is answered before a byte of the body is read.
        head = _head(runs, "Content-Length: 50000000")
        answer = await asyncio.to_thread(_raw_request, port, head, [], finish=False)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        # Chunked, no length: refused once the count passes the limit, the body unfinished.
        head = _head(runs, "Transfer-Encoding: chunked")
        piece = b"a" * 8192
        chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * 10  # 80 KiB of a 50 MB body
        answer = await asyncio.to_thread(_raw_request, port, head, chunks, finish=False)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]

        many = {"input": {"messages": [{"role": "user", "content": f"m{i}"} for i in range(6)]}}
        await _refused(await client.post(runs, json=many), 422, "input.messages", "6 messages", "max_messages")
        long = {"input": {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": "y" * 3000}]}}
        await _refused(await client.post(runs, json=long), 422, "input.messages.1", "max_message_bytes")
        await _refused(await client.post(runs, json=run_body("hi", metadata={"k": "z" * 2000})), 422, "metadata")
        await _refused(await client.post("/api/threads", json={"metadata": {"k": "z" * 2000}}), 422, "metadata")
        await _no_runs(client, thread_id)

        # Within the limits the Gateway serves as before, on the same server.
        fits = {"input": {"messages": [{"role": "user", "content": f"m{i}"} for i in range(5)]}}
        created = await client.post(runs, json=fits)
        assert created.status_code == 200, created.text
        assert (await wait_run(client, thread_id, created.json()["run_id"]))["status"] == "success"


async def test_default_limits_refuse_the_issue_bodies(tmp_path: Path) -> None:
    """The issue's 10 MB body and 100 000 messages, with the documented defaults."""
    from deerflow_ext.config.schema import RequestLimits
    from deerflow_ext.gateway import create_app

    defaults = RequestLimits()
    assert defaults.max_body_bytes == 4 * 1024 * 1024 and defaults.max_messages == 500
    app = create_app(make_settings(tmp_path, []))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        runs = f"/api/threads/{thread_id}/runs"
        # The 10 MB run: answered 413 with 64 KiB of it sent (a client still writing would
        # see the connection close under it: the rest is never read).
        port = int(live.base_url.rsplit(":", 1)[1])
        head = _head(runs, "Content-Length: 10000000")
        answer = await asyncio.to_thread(_raw_request, port, head, [b"{" + b" " * 65535], finish=False)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        messages = {"input": {"messages": [{"role": "user", "content": "m"}] * 100_000}}
        response = await client.post(runs, json=messages)
        assert response.status_code in (413, 422), response.text[:200]
        messages = {"input": {"messages": [{"role": "user", "content": "m"}] * 501}}
        await _refused(await client.post(runs, json=messages), 422, "501 messages")
        await _no_runs(client, thread_id)


# -- item 8: query parameters and unexpected errors ------------------------------------------


async def test_query_parameters_out_of_range_are_422(tmp_path: Path) -> None:
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, []))
    async with live_server(app) as live, live.client() as client:
        thread_id = await new_thread(client)
        for path in (
            f"/api/threads?offset={2**63}",
            "/api/threads?limit=-1",
            f"/api/threads?limit={10**30}",
            f"/api/threads/{thread_id}/runs?offset={2**63}",
            f"/api/threads/{thread_id}/runs?offset=-5",
            f"/api/threads/{thread_id}/history?limit=0",
        ):
            response = await client.get(path)
            assert response.status_code == 422, (path, response.status_code, response.text[:200])
            assert "limit" in response.json()["detail"] or "offset" in response.json()["detail"]
        response = await client.post("/api/threads/search", json={"offset": 2**63})
        await _refused(response, 422, "offset")


def _client_port(response: httpx.Response) -> int:
    stream = response.extensions["network_stream"]
    return int(stream.get_extra_info("client_addr")[1])


async def test_an_unexpected_error_is_a_json_500_on_a_kept_connection(tmp_path: Path) -> None:
    """The threads table disappears under the running Gateway (a real database fault): the
    listing answers a JSON 500, and the very same connection serves the next requests."""
    from deerflow_ext.gateway import create_app

    app = create_app(make_settings(tmp_path, []))
    database = sqlite_url(tmp_path).split(":///", 1)[1]
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with live_server(app) as live, live.client(limits=limits) as client:
        before = await client.get("/api/threads")
        assert before.status_code == 200
        port = _client_port(before)
        with sqlite3.connect(database) as db:
            db.execute("ALTER TABLE threads RENAME TO threads_away")
        try:
            failed = await client.get("/api/threads")
            assert failed.status_code == 500, failed.text
            assert failed.headers["content-type"].startswith("application/json")
            assert failed.json()["detail"].startswith("internal error")
            assert failed.headers.get("connection", "").lower() != "close"
            after = await client.get("/health")
            assert after.status_code == 200
            assert _client_port(failed) == _client_port(after) == port  # one connection throughout
        finally:
            with sqlite3.connect(database) as db:
                db.execute("ALTER TABLE threads_away RENAME TO threads")
        again = await client.get("/api/threads")
        assert again.status_code == 200 and _client_port(again) == port
