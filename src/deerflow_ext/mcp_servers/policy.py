"""What an HTTP caller may write into ``mcpServers``.

A stdio server is code execution on the Gateway's machine, and ``extensions_config.json`` is
writable over HTTP; ``config.yaml`` is the operator's file. So over HTTP a server may be
enabled, disabled or removed freely, but a stdio ``command``, ``args`` or ``env`` that is new
or changed needs its command in ``mcp.allowed_commands``. The CLI, run by an operator at the
machine, is not asked.

A remote server's URL that is new or changed must pass the Gateway's one URL policy, the
webhooks' (``deerflow_ext.url_policy``, ``config.yaml``'s ``webhooks.url``) — otherwise any
API caller could make the Gateway connect into its own network. It is checked as written
(scheme, port, domain, length, credentials, a literal address), then its name is resolved
once and every address it gave checked, so ``localhost`` or a name pointing inward is
refused as a webhook would be. Unlike a webhook, a name that does not resolve *now* is let
through: the MCP client makes its own lookup at each connection (a write-time answer is no
pin), so an unresolvable name says no more about where it will point than a public one, and
refusing it would make a ``PUT`` depend on DNS being up. A URL that starts with one of
``mcp.allowed_url_prefixes`` is the operator's explicit allowance and is not checked at all
(a local server, say ``http://127.0.0.1:9000/``, without opening loopback to webhooks too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from deerflow_ext.config.schema import McpConfig
from deerflow_ext.url_policy import UnresolvedHostError, UrlPolicy, UrlRefusedError, Voice

from .specs import ServerSpec, SpecError, parse_specs

__all__ = ["http_write_refusals", "url_refusal"]


def url_refusal(name: str, url: str, config: McpConfig, policy: UrlPolicy) -> str | None:
    """Why server ``name``'s ``url`` may not be written over HTTP; None when it may. The
    lookup blocks: call it from a worker thread."""
    if any(url.startswith(prefix) for prefix in config.allowed_url_prefixes):
        return None
    speaking = replace(
        policy,
        voice=Voice(
            subject=f"mcpServers.{name}.url",
            credentials=f"mcpServers.{name}.headers",
            allowance="; mcp.allowed_url_prefixes can allow it",
        ),
    )
    try:
        speaking.resolve_blocking(speaking.check(url))
    except UnresolvedHostError:
        return None
    except UrlRefusedError as exc:
        return str(exc)
    return None


def _launch(spec: ServerSpec) -> tuple[object, ...]:
    return (spec.command, spec.args, spec.env)


def http_write_refusals(
    current: Mapping[str, object] | None, new: Mapping[str, object], config: McpConfig, urls: UrlPolicy
) -> list[str]:
    """One line per server of ``new`` (a whole ``extensions_config.json`` document) that an
    HTTP caller may not write over ``current`` (the file's document now; None when there is
    none or it does not parse, so every server counts as new). ``urls`` is the Gateway's URL
    policy (``UrlPolicy.of(config.webhooks.url)``); a new or changed URL's name is looked up,
    so this blocks: call it from a worker thread."""
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
            why = url_refusal(spec.name, spec.url, config, urls)
            if why is not None:
                refusals.append(why)
    return refusals
