"""An MCP server that misbehaves on request: run as ``python tests/mcp_hostile_server.py``.

Its tools crash the process mid-call, hang, or answer normally, so the client's
session handling can be tested against a real server process.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("hostile", version="1")


@server.tool(description="Return the text given.")
def echo(text: str) -> str:
    return text


@server.tool(description="The server's process id.")
def pid() -> int:
    return os.getpid()


@server.tool(description="Exit the server process in the middle of the call.")
def crash() -> str:
    sys.stderr.write("hostile: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Sleep, blocking the server, for the seconds given.")
def hang(seconds: float = 3600) -> str:
    time.sleep(seconds)
    return "woke up"


@server.tool(description="Report a tool error.")
def fail(message: str) -> str:
    raise ValueError(message)


@server.tool(description="The value of an environment variable, or null.")
def getenv(name: str) -> str | None:
    return os.environ.get(name)


if __name__ == "__main__":
    server.run("stdio")
