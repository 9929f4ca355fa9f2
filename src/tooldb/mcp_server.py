"""The registry as an MCP server: any MCP client sees the tenant's tools and calls them
through tooldb (binding, execution and recording as for every call).

What the server offers is a *mode*, a ``ToolSource``: ``RegistryTools`` offers every
enabled tool (optionally one category), read from the registry at request time so
a tool added while the server runs shows up. Another mode (say, ``search_tools`` +
``call_tool`` over a selection) is another ``ToolSource``; the transports do not change.

Caller mistakes map as MCP expects: an unknown or disabled tool is a protocol
error (INVALID_PARAMS); arguments that do not bind are an ``isError`` result with
the binding message, so a model can correct its call; a failed tool is an
``isError`` result with the tool's error.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

from . import __version__
from .errors import ArgumentError, NotFound, ToolDisabled, UsageError
from .mcp_sessions import SDK_HINT
from .registry import Registry
from .types import ToolRecord, ToolResult

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, Tool

INSTRUCTIONS = (
    "Tools from a tooldb registry. Every call is validated against the tool's JSON Schema "
    "and recorded; an argument error explains what to fix."
)


class ToolSource(Protocol):
    """A server mode: what tools/list shows and what tools/call does."""

    def list_tools(self) -> list[Tool]: ...

    def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult: ...


class RegistryTools:
    """Every enabled tool of the registry's tenant, or of one category."""

    def __init__(self, registry: Registry, category: str | None = None) -> None:
        self.registry = registry
        self.category = category

    def list_tools(self) -> list[Tool]:
        return [mcp_tool(tool) for tool in self.registry.list(category=self.category)]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS

        try:
            if self.category is not None and self.registry.get(name).spec.category != self.category:
                raise NotFound(f"no tool named {name!r} in category {self.category!r}")
            result = self.registry.call(name, arguments)
        except (NotFound, ToolDisabled) as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        except (ArgumentError, UsageError) as exc:
            return error_result(str(exc))
        return call_result(result)


def mcp_tool(tool: ToolRecord) -> Tool:
    from mcp.types import Tool

    return Tool(
        name=tool.name,
        description=tool.spec.description or None,
        input_schema=tool.spec.parameters,
    )


def call_result(result: ToolResult) -> CallToolResult:
    """A ToolResult as MCP content: output as text, dict data as structured content."""
    from mcp.types import CallToolResult, TextContent

    if not result.success:
        return error_result(result.error or result.output)
    return CallToolResult(
        content=[TextContent(text=result.output)],
        structured_content=result.data if isinstance(result.data, dict) else None,
        meta={"tooldb/call_id": result.call_id, "tooldb/duration_ms": result.duration_ms},
    )


def error_result(message: str) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def build_server(source: ToolSource) -> Server[Any]:
    """A low-level MCP server whose tool handlers run the source in worker threads
    (registry calls block on the store and on tools)."""
    import anyio
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolRequestParams, ListToolsResult

    async def on_list_tools(_ctx: Any, _params: Any) -> ListToolsResult:
        return ListToolsResult(tools=await anyio.to_thread.run_sync(source.list_tools))

    async def on_call_tool(_ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        arguments = dict(params.arguments or {})
        return await anyio.to_thread.run_sync(source.call_tool, params.name, arguments)

    return Server(
        "tooldb",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def serve_stdio(source: ToolSource) -> None:
    """Serve on stdin/stdout until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(source)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def serve_http(source: ToolSource, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    import uvicorn

    app = build_server(source).streamable_http_app(host=host)
    sys.stderr.write(f"tooldb MCP server on http://{host}:{port}/mcp\n")
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


def require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UsageError(SDK_HINT) from None
