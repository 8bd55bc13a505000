"""``extensions_config.json``'s ``mcpServers``, read as the connections they describe.

The Gateway's routes validate what is written over HTTP; the file may also be edited by
hand or by the CLI, so what is read here is checked again, entry by entry: an entry that
cannot describe a server is a :class:`ServerSpec` with a ``problem`` (shown in the state
view, logged once) and the others still load.

:class:`SpecsFile` reads the file again only when its ``stat`` changes (modification time,
size, inode: an atomic replace is a new inode), so a run pays one ``stat`` to see an edit.
A file that does not parse keeps the servers of the last one that did, and says why.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["ServerSpec", "SpecError", "SpecsFile", "parse_specs", "resolve_values"]

logger = logging.getLogger("deerflow_ext.mcp_servers")

Transport = Literal["stdio", "sse", "http"]
_TRANSPORTS: tuple[Transport, ...] = ("stdio", "sse", "http")
_REFERENCE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


class SpecError(ValueError):
    """A server's entry cannot be used as written (one line naming the field)."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server as the file describes it. ``env`` and ``headers`` keep their values as
    written (``$VAR`` references unresolved): the spec is compared and shown, never the
    secrets a reference stands for."""

    name: str
    transport: Transport = "stdio"
    enabled: bool = True
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    problem: str | None = None

    def connection(self) -> dict[str, Any]:
        """The ``langchain-mcp-adapters`` connection, references resolved from this process's
        environment; :class:`SpecError` names a variable that is not set (never a value)."""
        if self.problem is not None:
            raise SpecError(self.problem)
        if self.transport == "stdio":
            if not self.command:
                raise SpecError("a stdio server needs a command")
            connection: dict[str, Any] = {"transport": "stdio", "command": self.command, "args": list(self.args)}
            if self.env:
                connection["env"] = resolve_values(self.env, "env")
            return connection
        if not self.url:
            raise SpecError(f"an {self.transport} server needs a url")
        connection = {"transport": "sse" if self.transport == "sse" else "streamable_http", "url": self.url}
        if self.headers:
            connection["headers"] = resolve_values(self.headers, "headers")
        return connection


def resolve_values(values: tuple[tuple[str, str], ...], field: str) -> dict[str, str]:
    """``$VAR`` and ``${VAR}`` in each value replaced by the variable's value (``$$`` is not
    special: a value with a literal ``$`` followed by a name must not name a variable)."""
    resolved: dict[str, str] = {}
    for key, value in values:

        def lookup(match: re.Match[str], key: str = key) -> str:
            name = match.group("braced") or match.group("bare")
            found = os.environ.get(name)
            if found is None:
                raise SpecError(f"{field}.{key}: the environment variable ${name} is not set")
            return found

        resolved[key] = _REFERENCE.sub(lookup, value)
    return resolved


def _strings(value: Any, field: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise SpecError(f"{field}: an object of strings is required")
    return tuple(sorted((str(k), v) for k, v in value.items()))


def _spec(name: str, entry: Any) -> ServerSpec:
    if not isinstance(entry, Mapping):
        raise SpecError("an object is required")
    transport = entry.get("type") or entry.get("transport") or "stdio"
    if transport not in _TRANSPORTS:
        raise SpecError(f"type: {transport!r} is not one of stdio, sse, http")
    command, url, args = entry.get("command"), entry.get("url"), entry.get("args") or []
    if command is not None and not isinstance(command, str):
        raise SpecError("command: a string is required")
    if url is not None and not isinstance(url, str):
        raise SpecError("url: a string is required")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SpecError("args: a list of strings is required")
    return ServerSpec(
        name=name,
        transport=transport,
        enabled=entry.get("enabled", True) is not False,
        command=command,
        args=tuple(args),
        env=_strings(entry.get("env"), "env"),
        url=url,
        headers=_strings(entry.get("headers"), "headers"),
    )


def parse_specs(document: Any) -> tuple[ServerSpec, ...]:
    """Every entry of ``document["mcpServers"]``, in the file's order; an unusable entry is a
    spec with its ``problem``."""
    servers = document.get("mcpServers") if isinstance(document, Mapping) else None
    if servers is None:
        return ()
    if not isinstance(servers, Mapping):
        raise SpecError("mcpServers: an object is required")
    specs: list[ServerSpec] = []
    for name, entry in servers.items():
        try:
            specs.append(_spec(str(name), entry))
        except SpecError as exc:
            specs.append(ServerSpec(name=str(name), enabled=False, problem=f"mcpServers.{name}: {exc}"))
    return tuple(specs)


class SpecsFile:
    """The servers ``path`` describes now, read again only when the file changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._specs: tuple[ServerSpec, ...] = ()
        self.error: str | None = None

    def current(self) -> tuple[ServerSpec, ...]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._specs, self.error = None, (), None
            return self._specs
        seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if seen != self._seen:
            self._seen = seen
            try:
                self._specs = parse_specs(json.loads(self.path.read_text(encoding="utf-8")))
                self.error = None
            except (OSError, ValueError) as exc:  # JSONDecodeError and SpecError are ValueErrors
                self.error = f"{self.path}: {exc}; the MCP servers it last described are kept"
                logger.warning("%s", self.error)
        return self._specs
