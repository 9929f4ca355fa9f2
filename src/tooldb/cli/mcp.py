"""``tooldb mcp``: serve the registry to MCP clients (the server lives in ``tooldb.mcp.server``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from .app import _errors, _registry, _state, app


class McpTransport(StrEnum):
    stdio = "stdio"
    http = "http"


@app.command("mcp")
def mcp_serve(
    transport: Annotated[
        McpTransport, typer.Option(help="stdio, or streamable HTTP at http://HOST:PORT/mcp.")
    ] = McpTransport.stdio,
    host: Annotated[str, typer.Option(help="HTTP address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = 8000,
    category: Annotated[str | None, typer.Option(help="Offer only this category.")] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Serve this tenant (overrides the global one).")
    ] = None,
    select: Annotated[
        bool,
        typer.Option(
            "--select",
            help="Offer two tools, search_tools (tooldb selection) and call_tool, "
            "instead of every tool's schema (for large registries).",
        ),
    ] = False,
    k: Annotated[
        int,
        typer.Option("-k", "--k", min=1, max=100, help="With --select: search_tools' default k."),
    ] = 5,
    ooda_every: Annotated[
        float | None,
        typer.Option(
            "--ooda-every",
            min=1,
            help="Run an OODA cycle every SECONDS while serving (one line per cycle on stderr).",
        ),
    ] = None,
) -> None:
    """Serve the registry's enabled tools to MCP clients; calls are bound, run and recorded."""
    from ..mcp.server import (
        RegistryTools,
        SelectionTools,
        ToolSource,
        require_sdk,
        serve_http,
        serve_stdio,
    )

    with _errors():
        require_sdk()
    _state.tenant = tenant or _state.tenant
    with _registry(False) as registry:
        source: ToolSource = (
            SelectionTools(registry, category, k) if select else RegistryTools(registry, category)
        )
        from .ooda import ooda_schedule

        with ooda_schedule(registry, ooda_every):
            if transport is McpTransport.http:
                serve_http(source, host, port)
            else:
                serve_stdio(source)
