"""What an HTTP caller may write into ``mcpServers``.

A stdio server is code execution on the Gateway's machine, and ``extensions_config.json`` is
writable over HTTP; ``config.yaml`` is the operator's file. So over HTTP a server may be
enabled, disabled or removed freely, but a stdio ``command``, ``args`` or ``env`` that is new
or changed needs its command in ``mcp.allowed_commands``. A remote server's URL that is new or
changed must be ``https`` to a host that is not a loopback, private or link-local address
(written as such: a name is not resolved here), unless it starts with one of
``mcp.allowed_url_prefixes`` — otherwise any API caller could make the Gateway connect to
its own network. The CLI, run by an operator at the machine, is not asked.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from deerflow_ext.config.schema import McpConfig

from .specs import ServerSpec, SpecError, parse_specs

__all__ = ["http_write_refusals", "url_refusal"]

_LOCAL_NAMES = ("localhost", "localhost.localdomain")


def url_refusal(url: str, config: McpConfig) -> str | None:
    """Why ``url`` may not be written over HTTP; None when it may."""
    if any(url.startswith(prefix) for prefix in config.allowed_url_prefixes):
        return None
    parts = urlsplit(url)
    if parts.scheme != "https":
        return f"{url!r} is not https (mcp.allowed_url_prefixes can allow it)"
    host = (parts.hostname or "").lower().rstrip(".")
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return f"{url!r} names this machine (mcp.allowed_url_prefixes can allow it)"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified:
        return f"{url!r} is a loopback, private or link-local address (mcp.allowed_url_prefixes can allow it)"
    return None


def _launch(spec: ServerSpec) -> tuple[object, ...]:
    return (spec.command, spec.args, spec.env)


def http_write_refusals(
    current: Mapping[str, object] | None, new: Mapping[str, object], config: McpConfig
) -> list[str]:
    """One line per server of ``new`` (a whole ``extensions_config.json`` document) that an
    HTTP caller may not write over ``current`` (the file's document now; None when there is
    none or it does not parse, so every server counts as new)."""
    try:
        before = {spec.name: spec for spec in parse_specs(current or {})}
    except SpecError:
        before = {}
    refusals: list[str] = []
    for spec in parse_specs(new):
        old = before.get(spec.name)
        if spec.transport == "stdio":
            if spec.command is None:
                continue  # nothing to run: the server cannot start
            if old is not None and old.transport == "stdio" and _launch(old) == _launch(spec):
                continue
            if spec.command not in config.allowed_commands:
                refusals.append(
                    f"mcpServers.{spec.name}: the stdio command {spec.command!r} is not in config.yaml's "
                    "mcp.allowed_commands; a new or changed command, args or env is written by an operator "
                    "(`deerflow-ext extensions mcp add`) or allowed there"
                )
        elif spec.url is not None and (old is None or old.url != spec.url):
            why = url_refusal(spec.url, config)
            if why is not None:
                refusals.append(f"mcpServers.{spec.name}: url {why}")
    return refusals
