"""What ``mcp_servers`` reads from ``extensions_config.json`` and what an HTTP caller may write
into it (no server is started here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deerflow_ext.config.schema import McpConfig
from deerflow_ext.config.webhooks_config import WebhookUrlPolicyConfig
from deerflow_ext.mcp_servers import http_write_refusals
from deerflow_ext.mcp_servers.specs import SpecError, SpecsFile, parse_specs
from deerflow_ext.url_policy import UrlPolicy

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


POLICY = UrlPolicy.of(WebhookUrlPolicyConfig())  # the webhooks' defaults
ALLOWANCE = "; mcp.allowed_url_prefixes can allow it)"


@pytest.mark.parametrize(
    ("before", "after", "refused"),
    [
        ({}, {"files": STDIO}, "mcp.allowed_commands"),  # a new command
        ({"files": STDIO}, {"files": {**STDIO, "enabled": False}}, None),  # switched off
        ({"files": {**STDIO, "enabled": False}}, {"files": STDIO}, None),  # and on
        ({"files": STDIO}, {}, None),  # removed
        ({"files": STDIO}, {"files": {**STDIO, "args": ["-y", "other"]}}, "mcp.allowed_commands"),
        ({"files": STDIO}, {"files": {**STDIO, "env": {"TOKEN": "$OTHER"}}}, "mcp.allowed_commands"),
        ({"files": STDIO}, {"renamed": STDIO}, "mcp.allowed_commands"),  # a new server
        ({}, {"files": {**STDIO, "command": "uvx"}}, None),  # allowed below
        ({}, {"s": {"type": "http", "url": "https://93.184.215.14/mcp"}}, None),  # a public address
        ({}, {"s": {"type": "http", "url": "https://no-such-host.invalid/mcp"}}, None),  # no address now
        (
            {},
            {"s": {"type": "sse", "url": "http://mcp.example.com/sse"}},
            "mcpServers.s.url: http:// is refused; use https:// (webhooks.url.require_https" + ALLOWANCE,
        ),
        (
            {},
            {"s": {"type": "http", "url": "https://127.0.0.1/mcp"}},
            "mcpServers.s.url: '127.0.0.1' is a loopback address (127.0.0.1); refused "
            "(webhooks.url.disable_loopback" + ALLOWANCE,
        ),
        ({}, {"s": {"type": "http", "url": "https://[::1]/mcp"}}, "webhooks.url.disable_loopback"),
        ({}, {"s": {"type": "http", "url": "https://[::ffff:127.0.0.1]/mcp"}}, "webhooks.url.disable_loopback"),
        (
            {},
            {"s": {"type": "http", "url": "https://169.254.169.254/latest"}},
            "mcpServers.s.url: '169.254.169.254' is a private or reserved address (169.254.169.254); refused "
            "(webhooks.url.disable_private_ips" + ALLOWANCE,
        ),
        ({}, {"s": {"type": "http", "url": "https://192.168.1.2/mcp"}}, "webhooks.url.disable_private_ips"),
        ({}, {"s": {"type": "http", "url": "https://0.0.0.0/mcp"}}, "webhooks.url.disable_private_ips"),
        # A name is looked up, every address it gives checked: localhost is this machine.
        ({}, {"s": {"type": "http", "url": "https://localhost/mcp"}}, "'localhost' is a loopback address"),
        (
            {},
            {"s": {"type": "http", "url": "https://user:pw@mcp.example.com/mcp"}},
            "mcpServers.s.url: credentials in the URL are refused; send them as mcpServers.s.headers",
        ),
        ({}, {"s": {"type": "http", "url": "ftp://mcp.example.com/mcp"}}, "the scheme must be https"),
        ({}, {"s": {"type": "http", "url": "http://127.0.0.1:9000/mcp"}}, None),  # an allowed prefix
        (
            {"s": {"type": "http", "url": "http://10.0.0.1/mcp"}},
            {"s": {"type": "http", "url": "http://10.0.0.1/mcp", "enabled": False}},
            None,  # unchanged: written by the operator, switched off over HTTP
        ),
    ],
)
def test_what_an_http_caller_may_write(before: dict, after: dict, refused: str | None) -> None:
    config = McpConfig(allowed_commands=["uvx"], allowed_url_prefixes=["http://127.0.0.1:9000/"])
    refusals = http_write_refusals({"mcpServers": before}, {"mcpServers": after}, config, POLICY)
    if refused is None:
        assert refusals == []
        return
    [line] = refusals
    assert line.startswith("mcpServers.") and refused in line, line


def test_the_webhooks_url_settings_govern_an_mcp_url_too() -> None:
    """One policy: what the operator opens or closes under ``webhooks.url`` holds for both."""
    config = McpConfig()
    local = {"mcpServers": {"s": {"type": "http", "url": "http://localhost:9000/mcp"}}}
    assert http_write_refusals(None, local, config, POLICY)
    opened = UrlPolicy.of(WebhookUrlPolicyConfig(require_https=False, disable_loopback=False))
    assert http_write_refusals(None, local, config, opened) == []
    narrowed = UrlPolicy.of(WebhookUrlPolicyConfig(allowed_domains=["*.tools.example"], allowed_ports=[443]))
    elsewhere = {"mcpServers": {"s": {"type": "http", "url": "https://93.184.215.14/mcp"}}}
    assert http_write_refusals(None, elsewhere, config, narrowed) == [
        "mcpServers.s.url: host '93.184.215.14' is not allowed "
        "(webhooks.url.allowed_domains: *.tools.example; mcp.allowed_url_prefixes can allow it)"
    ]
    other_port = {"mcpServers": {"s": {"type": "http", "url": "https://a.tools.example:8443/mcp"}}}
    assert http_write_refusals(None, other_port, config, narrowed) == [
        "mcpServers.s.url: port 8443 is not allowed "
        "(webhooks.url.allowed_ports: 443; mcp.allowed_url_prefixes can allow it)"
    ]
    # The operator's explicit allowance skips the policy for what it names, and only that.
    allowing = McpConfig(allowed_url_prefixes=["https://a.tools.example:8443/"])
    assert http_write_refusals(None, other_port, allowing, narrowed) == []


def test_an_unreadable_file_counts_every_server_as_new() -> None:
    assert http_write_refusals(None, {"mcpServers": {"files": STDIO}}, McpConfig(), POLICY)
    assert not http_write_refusals(None, {"mcpServers": {"files": STDIO}}, McpConfig(allowed_commands=["npx"]), POLICY)


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
