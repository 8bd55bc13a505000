"""The agent's MCP servers (``extensions_config.json``'s ``mcpServers``), for real: a FastMCP
stdio server the Gateway starts and a streamable-HTTP one the test starts
(``mcp_fixture_server.py``), called by runs of a real Gateway on uvicorn (SQLite), through the
embedded model and through ``ChatOpenAI`` against the loopback provider."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_assembly_ext
import pytest

from fake_openai import FakeOpenAI
from live_uvicorn import LiveServer, free_port, live_server

pytestmark = pytest.mark.e2e

_SERVER = str(Path(__file__).with_name("mcp_fixture_server.py"))
_SECRET = "s3cret-greeting-value"


def _stdio(pid_file: Path, **extra: Any) -> dict[str, Any]:
    return {"type": "stdio", "command": sys.executable, "args": [_SERVER, "stdio", str(pid_file)], **extra}


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The streamable-HTTP server's URL; one process for the module."""
    port = free_port()
    pid_file = tmp_path_factory.mktemp("mcp-http") / "pid"
    proc = subprocess.Popen([sys.executable, _SERVER, "http", str(pid_file), str(port)])
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    pytest.fail(f"the HTTP MCP server exited with {proc.returncode}")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.asynccontextmanager
async def _gateway(directory: Path, servers: dict[str, Any] | None = None, **config: Any) -> AsyncIterator[LiveServer]:
    from deerflow_ext.config.loading import load_app_config
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions
    from deerflow_ext.gateway import create_app

    path = directory / "config.yaml"
    config = {
        "plugins": [{"name": "seen", "use": "mcp_assembly_ext:install"}],
        "title": {"enabled": False},
        "memory": {"enabled": False},
        **config,
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    if servers is not None:
        (directory / "extensions_config.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    previous = get_loaded_extensions()
    database = f"sqlite+aiosqlite:///{directory / 'deerflow.db'}"
    app = create_app(Settings(config=path, database_url=database), config=load_app_config(path))
    try:
        async with live_server(app, start_timeout=30) as served:
            yield served
    finally:
        set_loaded_extensions(previous)


async def _run(http: httpx.AsyncClient, text: str) -> list[dict[str, Any]]:
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}}
    answer = await http.post("/api/runs/wait", json=body)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["messages"])


def _tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == "tool"]


def _content(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


async def _states(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    view = (await http.get("/api/extensions-config/mcp-servers")).json()
    return {server["name"]: server for server in view["servers"]}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(FileNotFoundError):  # a zombie child is gone for our purpose
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True


async def _gone(pid: int) -> bool:
    for _ in range(200):
        if not _alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_stdio_and_http_servers_are_the_agents_tools_and_follow_the_file(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MCP_TEST_GREETING", _SECRET)
    pid_file = tmp_path / "stdio.pid"
    mcp = {"allowed_commands": [sys.executable], "allowed_url_prefixes": ["http://127.0.0.1:"]}
    caplog.set_level(logging.DEBUG)
    mcp_assembly_ext.SEEN.clear()
    async with _gateway(tmp_path, mcp=mcp) as served, served.client() as http:
        assert (await _states(http)) == {}
        before = await _run(http, 'use calculator {"expression": "1+1"}')
        assert _content(_tool_messages(before)[0]) == "2"
        assert mcp_assembly_ext.SEEN[-1][1] == ()
        no_mcp_fingerprint = mcp_assembly_ext.SEEN[-1][0]

        # Over HTTP: a stdio server whose command config.yaml allows, and a loopback URL it allows.
        servers = {
            "weather": _stdio(pid_file, env={"GREETING": "$MCP_TEST_GREETING"}),
            "loud": {"type": "http", "url": http_server},
        }
        put = await http.put("/api/extensions-config", json={"mcpServers": servers, "skills": {}})
        assert put.status_code == 200, put.text
        assert {name: s["state"] for name, s in (await _states(http)).items()} == {
            "weather": "stopped",
            "loud": "stopped",
        }

        messages = await _run(http, 'use lookup {"city": "Paris"}')
        [tool] = _tool_messages(messages)
        assert tool["name"] == "lookup" and tool.get("status") != "error"
        pid = int(pid_file.read_text())
        assert _content(tool) == f"{_SECRET}: sunny in Paris (pid {pid})"  # env from $MCP_TEST_GREETING
        assert _SECRET in messages[-1]["content"]  # the embedded model quotes the result
        fingerprint, seen = mcp_assembly_ext.SEEN[-1]
        assert sorted(seen) == [
            ("die", "weather", "stdio"),
            ("lookup", "weather", "stdio"),
            ("shout", "loud", "http"),
        ]
        assert fingerprint != no_mcp_fingerprint

        [shout] = _tool_messages(await _run(http, 'use shout {"text": "hi there"}'))
        assert _content(shout) == "HI THERE"
        states = await _states(http)
        assert states["weather"]["state"] == states["loud"]["state"] == "running"
        assert sorted(states["weather"]["tools"]) == ["die", "lookup"] and states["loud"]["tools"] == ["shout"]
        assert states["weather"]["starts"] == 1
        # A subagent has the MCP tools too; it runs on a loop of its own, the call is carried
        # to the session's.
        delegated = await _run(http, 'delegate: use lookup {"city": "Bern"}')
        assert any("sunny in Bern" in _content(m) for m in _tool_messages(delegated)), delegated
        # Loaded once: another run reuses the same process.
        await _run(http, 'use lookup {"city": "Oslo"}')
        assert int(pid_file.read_text()) == pid and (await _states(http))["weather"]["starts"] == 1

        # Disabled over HTTP (allowed: its command is unchanged): the next run has no such
        # tool, its process is stopped, the fingerprint goes back.
        servers["weather"] = {**servers["weather"], "enabled": False}
        put = await http.put("/api/extensions-config", json={"mcpServers": servers, "skills": {}})
        assert put.status_code == 200, put.text
        assert _tool_messages(await _run(http, 'use lookup {"city": "Rome"}')) == []
        assert [name for name, _, _ in mcp_assembly_ext.SEEN[-1][1]] == ["shout"]
        assert await _gone(pid)
        assert (await _states(http))["weather"]["state"] == "disabled"

        # Enabled again: a new process serves the next run.
        servers["weather"] = {**servers["weather"], "enabled": True}
        assert (await http.put("/api/extensions-config", json={"mcpServers": servers, "skills": {}})).status_code == 200
        [again] = _tool_messages(await _run(http, 'use lookup {"city": "Rome"}'))
        assert "sunny in Rome" in _content(again) and int(pid_file.read_text()) != pid
        last_pid = int(pid_file.read_text())
    # Stopped with the Gateway.
    assert await _gone(last_pid)
    assert _SECRET not in caplog.text  # an env value is never logged


async def test_a_server_that_dies_mid_run_leaves_the_run_successful(tmp_path: Path) -> None:
    pid_file = tmp_path / "stdio.pid"
    config = {"mcp": {"restart_backoff_seconds": 0}}
    async with _gateway(tmp_path, {"weather": _stdio(pid_file)}, **config) as served, served.client() as http:
        thread = (await http.post("/api/threads", json={})).json()["thread_id"]
        body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "use die {}"}]}}
        waited = await http.post(f"/api/threads/{thread}/runs/wait", json=body)
        assert waited.status_code == 200, waited.text
        messages = waited.json()["messages"]
        [run] = (await http.get(f"/api/threads/{thread}/runs")).json()
        assert run["status"] == "success"
        [tool] = _tool_messages(messages)
        assert tool["status"] == "error" and "weather" in _content(tool)
        assert messages[-1]["type"] == "ai"
        first = int(pid_file.read_text())
        assert await _gone(first)
        state = (await _states(http))["weather"]
        assert state["state"] == "failed" and state["error"]
        # Started again (no backoff configured) for the next run.
        [tool] = _tool_messages(await _run(http, 'use lookup {"city": "Lima"}'))
        assert "sunny in Lima" in _content(tool)
        assert int(pid_file.read_text()) != first and (await _states(http))["weather"]["starts"] == 2


async def test_over_http_a_command_config_yaml_does_not_allow_is_refused_and_the_cli_adds_it(
    tmp_path: Path,
) -> None:
    from deerflow_ext.cli import main

    pid_file = tmp_path / "stdio.pid"
    async with _gateway(tmp_path) as served, served.client() as http:
        refused = await http.put("/api/extensions-config", json={"mcpServers": {"weather": _stdio(pid_file)}})
        assert refused.status_code == 422
        assert "mcpServers.weather" in refused.json()["detail"] and "allowed_commands" in refused.json()["detail"]
        assert not (tmp_path / "extensions_config.json").exists()
        assert _tool_messages(await _run(http, 'use lookup {"city": "Paris"}')) == []
        assert not pid_file.exists()  # nothing started
        for url in ("http://example.com/mcp", "https://10.1.2.3/mcp", "https://localhost/mcp"):
            remote = {"mcpServers": {"remote": {"type": "http", "url": url}}}
            assert (await http.put("/api/extensions-config", json=remote)).status_code == 422, url

        # The operator at the machine may add any command.
        code = await asyncio.to_thread(
            main,
            [
                "extensions",
                "mcp",
                "add",
                "weather",
                "--command",
                sys.executable,
                "--arg",
                _SERVER,
                "--arg",
                "stdio",
                "--arg",
                str(pid_file),
                "--config",
                str(tmp_path / "config.yaml"),
            ],
        )
        assert code == 0
        [tool] = _tool_messages(await _run(http, 'use lookup {"city": "Paris"}'))
        assert "sunny in Paris" in _content(tool)
        # Over HTTP it may now be switched off and on, its command unchanged...
        current = (await http.get("/api/extensions-config")).json()
        current["mcpServers"]["weather"]["enabled"] = False
        assert (await http.put("/api/extensions-config", json=current)).status_code == 200
        # ...but not given other arguments.
        current["mcpServers"]["weather"]["args"].append("--more")
        assert (await http.put("/api/extensions-config", json=current)).status_code == 422


def _lookup_rome(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    offered = {tool["function"]["name"] for tool in body.get("tools", ())}
    if "lookup" in offered and not any(m.get("role") == "tool" for m in body["messages"]):
        return [("lookup", {"city": "Rome"})]
    return None


async def test_chat_openai_calls_an_mcp_tool(tmp_path: Path, http_server: str) -> None:
    pid_file = tmp_path / "stdio.pid"
    with FakeOpenAI(call_tools=_lookup_rome) as fake:
        model = {"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "gpt-x", "api_key": "k"}
        servers = {"weather": _stdio(pid_file), "loud": {"type": "http", "url": http_server}}
        async with (
            _gateway(tmp_path, servers, models=[{**model, "base_url": fake.base_url}]) as served,
            served.client() as http,
        ):
            messages = await _run(http, "weather in Rome?")
        [tool] = _tool_messages(messages)
        assert "sunny in Rome" in _content(tool)
        assert messages[-1]["content"] == "Echo: weather in Rome?"
        offered = {tool["function"]["name"] for tool in fake.completions()[0]["tools"]}
        assert {"lookup", "shout", "die", "calculator"} <= offered


async def test_a_server_that_never_answers_or_cannot_start_leaves_runs_going_without_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pid_file = tmp_path / "silent.pid"
    silent = f"import os, pathlib, time; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(120)"
    servers = {
        "silent": {"type": "stdio", "command": sys.executable, "args": ["-c", silent]},
        "weather": _stdio(tmp_path / "w.pid"),
        "missing": {"type": "stdio", "command": str(tmp_path / "no-such-command")},
    }
    config = {"mcp": {"startup_timeout_seconds": 0.5}}
    caplog.set_level(logging.WARNING, logger="deerflow_ext.mcp_servers")
    async with _gateway(tmp_path, servers, **config) as served, served.client() as http:
        # The run waits for neither past the bound... and the second run has the one that came up.
        for _ in range(100):
            messages = await _run(http, 'use lookup {"city": "Quito"}')
            if _tool_messages(messages):
                break
        [tool] = _tool_messages(messages)
        assert "sunny in Quito" in _content(tool)
        states = await _states(http)
        assert states["silent"]["state"] == "starting" and states["weather"]["state"] == "running"
        assert states["missing"]["state"] == "failed" and states["missing"]["error"]
        pid = int(pid_file.read_text())
    assert "MCP server 'silent' is not ready after 0.5 s" in caplog.text
    assert caplog.text.count("'silent' is not ready") == 1  # one line per start, not per run
    assert "MCP server 'missing' failed" in caplog.text
    assert await _gone(pid)  # stopped with the Gateway, though it never answered
