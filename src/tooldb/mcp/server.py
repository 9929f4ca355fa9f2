"""The registry as an MCP server: any MCP client sees the tenant's tools and calls them
through tooldb (binding, execution and recording as for every call).

What the server offers is a *mode*, a ``ToolSource``: ``RegistryTools`` offers every
enabled tool (optionally one category), read from the registry at request time so
a tool added while the server runs shows up. ``SelectionTools`` (``tooldb mcp
--select``) offers two tools instead, ``search_tools`` (tooldb selection) and
``call_tool`` (any enabled tool by name), for registries too large to list; the
transports do not change.

Caller mistakes map as MCP expects: an unknown or disabled tool is a protocol
error (INVALID_PARAMS); arguments that do not bind are an ``isError`` result with
the binding message, so a model can correct its call; a failed tool is an
``isError`` result with the tool's error. In selection mode the tool name is an
*argument* of ``call_tool``, so an unknown, disabled or out-of-category name is an
``isError`` result too (the model searches again).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, Protocol

from ..binding.runtime import visible_schema
from ..context import use_session
from ..errors import ArgumentError, NotFound, ToolDisabled, UsageError
from ..types import ToolRecord, ToolResult
from .sessions import SDK_HINT

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, Tool

    from ..registry import Registry

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


SEARCH_TOOLS = "search_tools"
CALL_TOOL = "call_tool"
MAX_SEARCH_K = 100


class SelectionTools:
    """Two tools for large registries: ``search_tools`` runs ``registry.select`` (each
    search is recorded as a decision) and returns the best tools with their JSON
    Schemas; ``call_tool`` calls one of them by name through ``registry.call``."""

    def __init__(self, registry: Registry, category: str | None = None, k: int = 5) -> None:
        if isinstance(k, bool) or not 1 <= k <= MAX_SEARCH_K:
            raise UsageError(f"k must be a whole number from 1 to {MAX_SEARCH_K}, got {k!r}")
        self.registry = registry
        self.category = category
        self.k = k

    def list_tools(self) -> list[Tool]:
        from mcp.types import Tool

        scope = f" in category {self.category!r}" if self.category else ""
        category: dict[str, Any] = {"type": "string", "description": "Only this category."}
        if self.category is not None:
            category["enum"] = [self.category]
        search = Tool(
            name=SEARCH_TOOLS,
            description=(
                f"Find the tools{scope} that best do a task, described in words. Returns the "
                "best tools first, each with its name, description, category, score and "
                f"JSON Schema `parameters`; call one with `{CALL_TOOL}`."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The task, in words."},
                    "k": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_K,
                        "default": self.k,
                        "description": "How many tools to return.",
                    },
                    "category": category,
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        )
        call = Tool(
            name=CALL_TOOL,
            description=(
                f"Call a tool found by `{SEARCH_TOOLS}`: its `name` and `arguments` matching "
                "its `parameters` schema."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name."},
                    "arguments": {
                        "type": "object",
                        "description": "The tool's arguments.",
                        "default": {},
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        )
        return [search, call]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS

        try:
            if name == SEARCH_TOOLS:
                return self.search(arguments)
            if name == CALL_TOOL:
                return self.call(arguments)
        except (NotFound, ToolDisabled, ArgumentError, UsageError) as exc:
            return error_result(str(exc))
        raise MCPError(
            INVALID_PARAMS, f"no tool named {name!r}: use {SEARCH_TOOLS!r} or {CALL_TOOL!r}"
        )

    def search(self, arguments: dict[str, Any]) -> CallToolResult:
        from mcp.types import CallToolResult, TextContent

        _only(arguments, SEARCH_TOOLS, {"query", "k", "category"})
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise UsageError("'query' must be a non-empty text describing the task")
        k = arguments.get("k", self.k)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEARCH_K:
            raise UsageError(f"'k' must be a whole number from 1 to {MAX_SEARCH_K}, got {k!r}")
        category = arguments.get("category")
        if category is not None and not isinstance(category, str):
            raise UsageError(f"'category' must be a text, got {category!r}")
        if self.category is not None:
            if category not in (None, self.category):
                raise UsageError(f"this server offers only category {self.category!r}")
            category = self.category
        selection = self.registry.select(query, k, category=category)
        tools = []
        for candidate in selection.candidates:
            try:
                spec = self.registry.get(candidate.name).spec
            except NotFound:  # removed since the index was read
                continue
            tools.append(
                {
                    "name": candidate.name,
                    "description": spec.description,
                    "category": candidate.category,
                    "score": round(candidate.final, 4),
                    "parameters": visible_schema(spec.parameters),
                }
            )
        document: dict[str, Any] = {
            "query": selection.task,
            "tools": tools,
            "decision_id": selection.decision_id,
        }
        if selection.notes:
            document["notes"] = selection.notes
        return CallToolResult(
            content=[TextContent(text=json.dumps(document, ensure_ascii=False))],
            structured_content=document,
        )

    def call(self, arguments: dict[str, Any]) -> CallToolResult:
        _only(arguments, CALL_TOOL, {"name", "arguments"})
        name = arguments.get("name")
        if not isinstance(name, str) or not name:
            raise UsageError("'name' must be the name of a tool (see search_tools)")
        tool_arguments = arguments.get("arguments")
        if tool_arguments is None:
            tool_arguments = {}
        if not isinstance(tool_arguments, dict):
            raise UsageError(f"'arguments' must be an object, got {tool_arguments!r}")
        if self.category is not None and self.registry.get(name).spec.category != self.category:
            raise NotFound(f"no tool named {name!r} in category {self.category!r}")
        return call_result(self.registry.call(name, tool_arguments))


def _only(arguments: dict[str, Any], tool: str, allowed: set[str]) -> None:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise UsageError(
            f"{tool} got unknown argument(s) {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(sorted(allowed))}"
        )


def mcp_tool(tool: ToolRecord) -> Tool:
    from mcp.types import Tool

    return Tool(
        name=tool.name,
        description=tool.spec.description or None,
        input_schema=visible_schema(tool.spec.parameters),
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
        with _internal_errors_hidden():
            return ListToolsResult(tools=await anyio.to_thread.run_sync(source.list_tools))

    async def on_call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        arguments = dict(params.arguments or {})
        # One MCP connection is one session for tools that take a session_id.
        session = getattr(ctx, "session", None)
        session_id = f"mcp-{id(session):x}" if session is not None else None

        def call() -> CallToolResult:
            with use_session(session_id):
                return source.call_tool(params.name, arguments)

        with _internal_errors_hidden():
            return await anyio.to_thread.run_sync(call)

    return Server(
        "tooldb",
        version=version("tooldb"),
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


INTERNAL_MESSAGE = "tooldb failed to handle this request; the server's log has the details"


@contextmanager
def _internal_errors_hidden() -> Iterator[None]:
    """What went wrong inside (a store's failure names its URL) goes to the server's
    stderr; the client gets JSON-RPC INTERNAL_ERROR with a message that names nothing."""
    from mcp import MCPError
    from mcp.types import INTERNAL_ERROR

    try:
        yield
    except MCPError:
        raise
    except Exception as exc:  # anything else is the server's failure
        sys.stderr.write(f"tooldb mcp: {type(exc).__name__}: {exc}\n")
        raise MCPError(INTERNAL_ERROR, INTERNAL_MESSAGE) from None


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
