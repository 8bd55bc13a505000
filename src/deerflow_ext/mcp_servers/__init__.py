"""The agent's MCP servers: ``extensions_config.json``'s ``mcpServers`` as the agent's tools.

DeerFlow gives its agents capabilities through MCP servers listed in
``extensions_config.json`` (per server ``enabled``, ``type`` — ``stdio``, ``sse`` or
``http`` — and ``command``/``args``/``env`` or ``url``/``headers``). This package owns
turning that list into LangChain tools, through ``langchain-mcp-adapters`` (no MCP client
of its own), and keeping them: each enabled server is one connection per Gateway process
(a stdio server one child process), started when a run first needs it, kept across runs,
started again after a failure with a doubling backoff, and stopped at shutdown. The file
is looked at once per run (its ``stat``); an edit (``PUT`` or the CLI) reaches the next run.

Failing open is the rule: a server that does not start, starts slowly or dies leaves the
run going without its tools, with one log line naming it; a call to a server that died is
a tool error the model reads, never a failed run.

``specs.py`` reads the file, ``policy.py`` says what an HTTP caller may write,
``connection.py`` keeps one server, ``servers.py`` all of them, ``origin.py`` marks a
tool with its server (the assembly descriptor's ``mcp_server``/``mcp_transport``).
``connection.py`` imports the MCP SDK and the adapters; ``servers.py`` imports it only
when a server is configured, so a Gateway without MCP servers pays for neither.
"""

from .origin import McpOrigin, mcp_origin
from .policy import http_write_refusals
from .servers import McpServers, ServerStatus
from .specs import ServerSpec

__all__ = ["McpOrigin", "McpServers", "ServerSpec", "ServerStatus", "http_write_refusals", "mcp_origin"]
