"""An MCP server whose tool list has misfits (a name of 300 characters, a remote
``$ref``, two names that become one, a default of the wrong type) and whose tools
answer big: run as ``python tests/security/mcp_misfit_server.py``."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool

SIZE = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = [
    Tool(name="big", description="n bytes of text.", input_schema=SIZE),
    Tool(name="big_error", description="An error of n bytes.", input_schema=SIZE),
    Tool(name="x" * 300, description="A name too long.", input_schema={"type": "object"}),
    Tool(
        name="remote",
        description="A remote $ref.",
        input_schema={
            "type": "object",
            "properties": {"p": {"$ref": "https://example.com/schema.json"}},
        },
    ),
    Tool(name="a.b", description="Becomes a_b.", input_schema={"type": "object"}),
    Tool(name="a_b", description="Also a_b.", input_schema={"type": "object"}),
    Tool(
        name="paged",
        description="A default of the wrong type.",
        input_schema={
            "type": "object",
            "properties": {"limit": {"type": "integer", "default": "250"}},
        },
    ),
]


async def on_list_tools(_ctx: Any, _params: Any) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def on_call_tool(_ctx: Any, params: Any) -> CallToolResult:
    arguments = params.arguments or {}
    n = int(arguments.get("n", 0))
    if params.name == "big_error":
        return CallToolResult(content=[TextContent(text="E" * n)], is_error=True)
    return CallToolResult(content=[TextContent(text="x" * n)])


server = Server("misfit", version="1", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
