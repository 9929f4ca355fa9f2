"""The ``tooldb`` command: a thin layer over the Registry, and the only place errors
become exit codes (0 ok, 1 tool failure, 2 bad usage or input).

Every command that prints data takes ``--json`` and then prints exactly one JSON
document on stdout; errors then come as ``{"error": {...}}`` on stdout as well as
a line on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..errors import ArgumentError, ToolDBError
from ..registry import Registry, open_registry
from ..settings import Settings
from ..stores import PutOutcome, open_store
from ..types import ToolRecord

app = typer.Typer(
    name="tooldb",
    help="tooldb: the tool layer for AI agents as a database and a runtime.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"terminal_width": 100, "max_content_width": 100},
)
add_app = typer.Typer(
    help="Register tools from Python modules, manifests, MCP servers or OpenAPI documents.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(add_app, name="add")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
_out = Console(soft_wrap=True, highlight=False)


class _State:
    db: str | None = None
    tenant: str | None = None
    as_json: bool = False


_state = _State()


@app.callback()
def _global(
    db: Annotated[
        str | None,
        typer.Option(
            "--db", envvar="TOOLDB_URL", help="Store URL: sqlite:///PATH or postgresql://..."
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", envvar="TOOLDB_TENANT", help="Tenant (default: default)."),
    ] = None,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(__version__)
        raise typer.Exit(0)
    _state.db, _state.tenant = db, tenant
    # Like `python -m`, let `add python mymodule` and python targets find the current directory.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


# -- plumbing -----------------------------------------------------------------
@contextmanager
def _registry(as_json: bool, *, create: bool = True) -> Iterator[Registry]:
    _state.as_json = as_json
    with _errors():
        registry = open_registry(_state.db, _state.tenant, create=create)
        try:
            yield registry
        finally:
            registry.close()


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except ToolDBError as exc:
        _fail(exc)


def _fail(exc: ToolDBError) -> NoReturn:
    if _state.as_json:
        error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, ArgumentError):
            error.update(tool=exc.tool, parameter=exc.parameter, problems=exc.problems)
        _print_json({"error": error})
    sys.stderr.write(f"error: {exc}\n")
    raise typer.Exit(exc.exit_code)


def _print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n")


def _when(timestamp: float | None) -> str:
    return (
        datetime.fromtimestamp(timestamp).isoformat(sep=" ", timespec="seconds")
        if timestamp
        else "-"
    )


def _pct(rate: float | None) -> str:
    return f"{rate:.0%}" if rate is not None else "-"


def _ms(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def _text(value: str) -> str:
    """Render user data literally (rich markup in a description must not be interpreted)."""
    from rich.markup import escape

    return escape(value)


def _table(*columns: str) -> Table:
    """A table whose last column alone wraps when the terminal is narrow.

    Rich shrinks wrappable columns first; with every column wrappable but a long
    no-wrap one, the short columns collapsed to nothing in an 80-column terminal.
    """
    table = Table()
    *fixed, flexible = columns
    for column in fixed:
        table.add_column(column, no_wrap=True)
    table.add_column(flexible, overflow="fold", min_width=24)
    return table


# -- commands -----------------------------------------------------------------
@app.command()
def init(as_json: JsonOpt = False) -> None:
    """Create the registry, or upgrade an existing one in place (data is kept)."""
    _state.as_json = as_json
    with _errors():
        settings = Settings.load(url=_state.db, tenant=_state.tenant)
        store = open_store(
            settings.resolved_url, sqlite_busy_timeout_s=settings.sqlite_busy_timeout_s
        )
        try:
            before, after = store.migrate()
            url = store.url
        finally:
            store.close()
        if before is not None and before != after:
            # Tools registered before selection existed get their search texts now.
            with open_registry(settings.resolved_url, settings=settings) as registry:
                for tenant in registry.store.tenants():
                    registry.for_tenant(tenant).refresh_documents()
    if as_json:
        _print_json({"url": url, "revision_before": before, "revision": after})
    elif before == after:
        _out.print(f"registry {_text(url)} is up to date (schema {after})")
    else:
        _out.print(f"registry {_text(url)} upgraded from {before or 'empty'} to {after}")


def _warn_embedding(registry: Registry) -> None:
    if registry.embedding_error:
        sys.stderr.write(
            f"warning: tools registered but not embedded ({registry.embedding_error}); "
            "they are selected by words until `tooldb embed` succeeds\n"
        )


def _report_added(outcomes: list[PutOutcome], as_json: bool) -> None:
    if as_json:
        _print_json(
            {
                "tools": [
                    {"name": o.record.name, "version": o.record.version, "status": o.status}
                    for o in outcomes
                ]
            }
        )
        return
    counts = {
        s: sum(1 for o in outcomes if o.status == s) for s in ("created", "updated", "unchanged")
    }
    for outcome in outcomes:
        if outcome.status != "unchanged":
            _out.print(
                f"{outcome.status:>9}  {_text(outcome.record.name)} (v{outcome.record.version})"
            )
    _out.print(
        f"{len(outcomes)} tools: {counts['created']} created, {counts['updated']} updated, "
        f"{counts['unchanged']} unchanged"
    )


@add_app.command("python")
def add_python(
    module: Annotated[str, typer.Argument(help="Importable module with @tool functions.")],
    as_json: JsonOpt = False,
) -> None:
    """Register every @tool function of a Python module."""
    with _registry(as_json) as registry:
        outcomes = registry.add_module(module)
    _report_added(outcomes, as_json)


@add_app.command("manifest")
def add_manifest(
    file: Annotated[Path, typer.Argument(help="YAML, JSON or JSON Lines manifest.")],
    as_json: JsonOpt = False,
) -> None:
    """Register the tools of a manifest (all or none), then embed the new ones."""
    from .selection import embedding_progress

    with _registry(as_json) as registry, embedding_progress(as_json) as progress:
        outcomes = registry.add_manifest(file, progress=progress)
    _report_added(outcomes, as_json)
    _warn_embedding(registry)


@add_app.command("mcp")
def add_mcp(
    name: Annotated[str, typer.Option("--name", help="Server name; its tools become NAME__TOOL.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(help="Server command and its arguments, after `--` (stdio server)."),
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="Streamable HTTP endpoint, instead of a command.")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="Environment variable passed to the server (repeatable)."),
    ] = None,
    category: Annotated[str | None, typer.Option(help="Category (default: NAME).")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds before a call to one of its tools is stopped.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Register every tool of an MCP server: `add mcp --name NAME -- COMMAND ARGS...`
    or `add mcp --name NAME --url URL`."""
    with _registry(as_json) as registry:
        outcomes = registry.add_mcp(
            name, command=command or None, url=url, env=env or (), category=category,
            timeout_s=timeout,
        )  # fmt: skip
    _report_added(outcomes, as_json)


@add_app.command("openapi")
def add_openapi(
    spec: Annotated[str, typer.Argument(help="OpenAPI 3 document: a file or an http(s) URL.")],
    base_url: Annotated[
        str | None, typer.Option(help="Call this base URL instead of the document's server.")
    ] = None,
    category: Annotated[
        str | None, typer.Option(help="Category of every tool (default: first tag).")
    ] = None,
    auth_secret: Annotated[
        str | None,
        typer.Option(help="Name of the env var / settings secret holding the API credential."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Register every operation of an OpenAPI 3 document as an http tool (all or none).

    A URL is fetched only from hosts allowed by http_allowed_hosts. Operations that
    cannot be imported are listed with the reason.
    """
    with _registry(as_json) as registry:
        found = registry.add_openapi(
            spec, base_url=base_url, category=category, auth_secret=auth_secret
        )
    if as_json:
        _print_json(found.summary())
        return
    _report_added(found.outcomes, as_json)
    for skipped in found.skipped:
        _out.print(f"  skipped  {_text(skipped.operation)}: {_text(skipped.reason)}")
    for warning in found.warnings:
        _out.print(f"  warning  {_text(warning)}")
    if found.secrets:
        names = ", ".join(found.secrets)
        _out.print(_text(f"secrets read at call time (env var or [secrets] in config): {names}"))


@app.command("list")
def list_tools(
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind (python, sql, ...).")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Include disabled tools.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the tenant's tools."""
    with _registry(as_json) as registry:
        tools = registry.list(category=category, kind=kind, include_disabled=show_all)
    if as_json:
        _print_json({"tools": [t.summary() for t in tools]})
        return
    table = _table("name", "category", "kind", "v", "enabled", "calls", "success", "description")
    for t in tools:
        table.add_row(
            _text(t.name), _text(t.spec.category), t.spec.kind.value, str(t.version),
            "yes" if t.enabled else "no", str(t.stats.usage_count), _pct(t.stats.success_rate),
            _text(t.spec.description.splitlines()[0] if t.spec.description else ""),
        )  # fmt: skip
    _out.print(table)
    _out.print(f"{len(tools)} tools")


@app.command()
def show(
    name: Annotated[str, typer.Argument(help="Tool name.")],
    version: Annotated[int | None, typer.Option(help="Show this older version.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a tool: schema, statistics and versions."""
    with _registry(as_json) as registry:
        tool = registry.get(name)
        versions = registry.versions(name)
        shown = registry.version(name, version).spec if version is not None else tool.spec
    document = {
        **tool.summary(),
        **shown.definition(),
        "shown_version": version or tool.version,
        "versions": [
            {"version": v.version, "content_hash": v.content_hash, "created_at": v.created_at}
            for v in versions
        ],
    }
    if as_json:
        _print_json(document)
        return
    _print_tool(tool, document)


def _print_tool(tool: ToolRecord, document: dict[str, Any]) -> None:
    stats = tool.stats
    _out.print(f"[bold]{_text(tool.name)}[/bold]  v{document['shown_version']} of {tool.version}"
               f"  ({'enabled' if tool.enabled else 'disabled'})")  # fmt: skip
    for key in ("description", "category", "kind", "target", "returns", "timeout_s"):
        _out.print(f"  {key:12} {_text(str(document[key]))}")
    _out.print("  parameters   " + _text(json.dumps(document["parameters"], ensure_ascii=False)))
    _out.print(
        f"  stats        {stats.usage_count} calls, success {_pct(stats.success_rate)}, "
        f"avg {_ms(stats.avg_duration_ms)} ms, last used {_when(stats.last_used)}"
    )
    for v in document["versions"]:
        _out.print(
            f"  version {v['version']:<4} {v['content_hash'][:12]}  {_when(v['created_at'])}"
        )


def _toggle(name: str, as_json: bool, action: Callable[[Registry, str], None], verb: str) -> None:
    with _registry(as_json) as registry:
        action(registry, name)
    if as_json:
        _print_json({"name": name, "action": verb})
    else:
        _out.print(f"{verb} {_text(name)}")


@app.command()
def enable(name: str, as_json: JsonOpt = False) -> None:
    """Enable a tool."""
    _toggle(name, as_json, Registry.enable, "enabled")


@app.command()
def disable(name: str, as_json: JsonOpt = False) -> None:
    """Disable a tool: it stays registered but cannot be called."""
    _toggle(name, as_json, Registry.disable, "disabled")


@app.command()
def remove(name: str, as_json: JsonOpt = False) -> None:
    """Remove a tool and its versions (its recorded calls are kept)."""
    _toggle(name, as_json, Registry.remove, "removed")


@app.command()
def call(
    name: Annotated[str, typer.Argument(help="Tool name.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    timeout: Annotated[
        float | None, typer.Option(help="Seconds before the tool is stopped.")
    ] = None,
    run_id: Annotated[str | None, typer.Option(help="Record the call under this run id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Call a tool: bind the arguments, run it, record the call."""
    with _registry(as_json) as registry:
        result = registry.call(name, args, timeout_s=timeout, run_id=run_id)
    if as_json:
        _print_json(result.model_dump(mode="json"))
    elif result.success:
        sys.stdout.write(result.output + ("\n" if not result.output.endswith("\n") else ""))
    else:
        sys.stderr.write(f"tool failed: {result.error}\n")
    raise typer.Exit(0 if result.success else 1)


@app.command()
def stats(as_json: JsonOpt = False) -> None:
    """Per-tool usage, success rate and latency."""
    with _registry(as_json) as registry:
        tools = registry.stats()
    if as_json:
        _print_json(
            {"tools": [{"name": t.name, "enabled": t.enabled, **t.stats.summary()} for t in tools]}
        )
        return
    table = _table("name", "calls", "success", "avg ms", "last used", "enabled")
    for t in tools:
        s = t.stats
        table.add_row(
            _text(t.name), str(s.usage_count), _pct(s.success_rate), _ms(s.avg_duration_ms),
            _when(s.last_used), "yes" if t.enabled else "no",
        )  # fmt: skip
    _out.print(table)


@app.command()
def calls(
    tool: Annotated[str | None, typer.Option(help="Only calls of this tool.")] = None,
    run_id: Annotated[str | None, typer.Option(help="Only calls of this run.")] = None,
    limit: Annotated[int, typer.Option(min=0, help="How many, newest first.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Recent calls, newest first."""
    with _registry(as_json) as registry:
        records = registry.calls(tool=tool, run_id=run_id, limit=limit)
    if as_json:
        _print_json({"calls": [r.model_dump(mode="json") for r in records]})
        return
    table = _table("id", "started", "tool", "v", "ok", "ms", "error")
    for r in records:
        table.add_row(str(r.id), _when(r.started_at), _text(r.tool_name), str(r.tool_version),
                      "yes" if r.success else "no", _ms(r.duration_ms),
                      _text((r.error or "")[:80]))  # fmt: skip
    _out.print(table)


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


def main() -> None:
    app()


from . import agents, ooda, selection, trace  # noqa: E402,F401  (they register commands)
