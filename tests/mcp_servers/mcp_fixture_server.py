"""An MCP server the tests start for real, on the ``mcp`` SDK's FastMCP.

``python mcp_fixture_server.py stdio PID_FILE`` serves over stdio (the Gateway starts it);
``python mcp_fixture_server.py http PID_FILE PORT`` serves streamable HTTP on loopback at
``/mcp`` (the test starts it). Either writes its process id to ``PID_FILE`` once started.

Tools over stdio: ``lookup(city)`` answers with ``$GREETING`` (the environment the server was
given) and ``die()`` ends the process in the middle of the call; over HTTP: ``shout(text)``
upper-cases.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP


def stdio_server() -> FastMCP:
    server = FastMCP("weather", log_level="WARNING")

    @server.tool()
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"{os.environ.get('GREETING', 'hello')}: sunny in {city} (pid {os.getpid()})"

    @server.tool()
    def die() -> str:
        """Ends the server's process."""
        os._exit(3)

    return server


def http_server(port: int) -> FastMCP:
    server = FastMCP("loud", host="127.0.0.1", port=port, log_level="WARNING")

    @server.tool()
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()

    return server


if __name__ == "__main__":
    transport, pid_file = sys.argv[1], Path(sys.argv[2])
    pid_file.write_text(str(os.getpid()))
    if transport == "stdio":
        stdio_server().run("stdio")
    else:
        http_server(int(sys.argv[3])).run("streamable-http")
