"""What ``mcp_servers`` reads from ``extensions_config.json`` and what an HTTP caller may write
into it (no server is started here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deerflow_ext.config.schema import McpConfig
from deerflow_ext.mcp_servers import http_write_refusals
from deerflow_ext.mcp_servers.specs import SpecError, SpecsFile, parse_specs

STDIO = {"type": "stdio", "command": "npx", "args": ["-y", "files"], "env": {"TOKEN": "$FILES_TOKEN"}}


def test_entries_become_specs_and_a_bad_one_is_named_not_fatal() -> None:
    specs = parse_specs(
        {
            "mcpServers": {
                "files": STDIO,
                "search": {"type": "http", "url": "https://mcp.example.com/mcp", "enabled": False},
                "broken": {"type": "websocket", "url": "wss://x"},
            }
        }
    )
    files, search, broken = specs
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio",
        "npx",
        ("-y", "files"),
        (("TOKEN", "$FILES_TOKEN"),),
    )
    assert (search.transport, search.enabled) == ("http", False)
    assert broken.problem == "mcpServers.broken: type: 'websocket' is not one of stdio, sse, http"
    assert search.connection() == {"transport": "streamable_http", "url": "https://mcp.example.com/mcp"}
    with pytest.raises(SpecError, match="websocket"):
        broken.connection()


def test_references_resolve_at_start_and_a_missing_one_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    [files] = parse_specs(
        {"mcpServers": {"files": {**STDIO, "env": {"TOKEN": "Bearer ${FILES_TOKEN}", "PLAIN": "a$"}}}}
    )
    monkeypatch.delenv("FILES_TOKEN", raising=False)
    with pytest.raises(SpecError) as missing:
        files.connection()
    assert str(missing.value) == "env.TOKEN: the environment variable $FILES_TOKEN is not set"
    monkeypatch.setenv("FILES_TOKEN", "t0ken")
    assert files.connection()["env"] == {"TOKEN": "Bearer t0ken", "PLAIN": "a$"}
    assert "t0ken" not in repr(files)  # the spec keeps the reference, never the value


def test_the_file_is_read_again_only_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "extensions_config.json"
    watched = SpecsFile(path)
    assert watched.current() == ()
    path.write_text(json.dumps({"mcpServers": {"files": STDIO}}))
    first = watched.current()
    assert [s.name for s in first] == ["files"] and watched.current() is first
    replacement = tmp_path / "next.json"
    replacement.write_text("{not json")
    os.replace(replacement, path)  # how every writer replaces it: a new inode
    assert watched.current() is first and "the MCP servers it last described are kept" in (watched.error or "")
    replacement.write_text(json.dumps({"mcpServers": {}}))
    os.replace(replacement, path)
    assert watched.current() == () and watched.error is None


@pytest.mark.parametrize(
    ("before", "after", "refused"),
    [
        ({}, {"files": STDIO}, True),  # a new command
        ({"files": STDIO}, {"files": {**STDIO, "enabled": False}}, False),  # switched off
        ({"files": {**STDIO, "enabled": False}}, {"files": STDIO}, False),  # and on
        ({"files": STDIO}, {}, False),  # removed
        ({"files": STDIO}, {"files": {**STDIO, "args": ["-y", "other"]}}, True),
        ({"files": STDIO}, {"files": {**STDIO, "env": {"TOKEN": "$OTHER"}}}, True),
        ({"files": STDIO}, {"renamed": STDIO}, True),  # a new server
        ({}, {"files": {**STDIO, "command": "uvx"}}, False),  # allowed below
        ({}, {"s": {"type": "http", "url": "https://mcp.example.com/mcp"}}, False),
        ({}, {"s": {"type": "sse", "url": "http://mcp.example.com/sse"}}, True),  # not https
        ({}, {"s": {"type": "http", "url": "https://127.0.0.1/mcp"}}, True),
        ({}, {"s": {"type": "http", "url": "https://[::1]/mcp"}}, True),
        ({}, {"s": {"type": "http", "url": "https://169.254.169.254/latest"}}, True),
        ({}, {"s": {"type": "http", "url": "https://192.168.1.2/mcp"}}, True),
        ({}, {"s": {"type": "http", "url": "https://api.localhost/mcp"}}, True),
        ({}, {"s": {"type": "http", "url": "http://127.0.0.1:9000/mcp"}}, False),  # an allowed prefix
        (
            {"s": {"type": "http", "url": "http://10.0.0.1/mcp"}},
            {"s": {"type": "http", "url": "http://10.0.0.1/mcp", "enabled": False}},
            False,
        ),
    ],
)
def test_what_an_http_caller_may_write(before: dict, after: dict, refused: bool) -> None:
    config = McpConfig(allowed_commands=["uvx"], allowed_url_prefixes=["http://127.0.0.1:9000/"])
    refusals = http_write_refusals({"mcpServers": before}, {"mcpServers": after}, config)
    assert bool(refusals) is refused, refusals
    if refused:
        [line] = refusals
        assert line.startswith("mcpServers.")


def test_an_unreadable_file_counts_every_server_as_new() -> None:
    assert http_write_refusals(None, {"mcpServers": {"files": STDIO}}, McpConfig())
    assert not http_write_refusals(None, {"mcpServers": {"files": STDIO}}, McpConfig(allowed_commands=["npx"]))


def test_the_cli_adds_and_removes_servers_and_names_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deerflow_ext.cli import main

    config = ["--config", str(tmp_path / "config.yaml")]
    (tmp_path / "config.yaml").write_text("{}\n")
    path = tmp_path / "extensions_config.json"
    add = ["extensions", "mcp", "add"]
    assert main([*add, "files", "--command", "npx", "--arg=-y", "--env", "TOKEN=$FILES_TOKEN", *config]) == 0
    assert (
        main([*add, "search", "--url", "https://mcp.example.com/mcp", "--transport", "sse", "--disabled", *config]) == 0
    )
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["files"] == {
        **servers["files"],
        "type": "stdio",
        "command": "npx",
        "args": ["-y"],
        "env": {"TOKEN": "$FILES_TOKEN"},
    }
    assert (servers["search"]["type"], servers["search"]["enabled"]) == ("sse", False)
    capsys.readouterr()
    assert main([*add, "both", "--command", "npx", "--url", "https://x", *config]) != 0
    assert "give --command (a stdio server) or --url" in capsys.readouterr().err
    assert main([*add, "bad", "--command", "npx", "--env", "NOVALUE", *config]) != 0
    assert "--env 'NOVALUE': NAME=VALUE is required" in capsys.readouterr().err
    assert main(["extensions", "mcp", "remove", "files", *config]) == 0
    assert main(["extensions", "mcp", "remove", "files", *config]) != 0
    assert "no MCP server 'files'" in capsys.readouterr().err
    assert set(json.loads(path.read_text())["mcpServers"]) == {"search"}
