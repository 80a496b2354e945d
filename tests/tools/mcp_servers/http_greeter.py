"""A streamable-HTTP MCP server built with the official SDK's server, on 127.0.0.1:PORT/mcp.

python http_greeter.py PORT
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("greeter")


@server.tool()
def greet(name: str = "World") -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


if __name__ == "__main__":
    server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True)
