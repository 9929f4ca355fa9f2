"""Tool commands of the ``tooldb`` CLI: ``init``, ``add python|manifest|mcp|openapi``,
``list``, ``show``, ``enable``, ``disable``, ``remove``, ``call``, ``stats``, ``calls``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from ..registry import Registry, open_registry
from ..settings import Settings
from ..stores import PutOutcome, open_store
from ..types import ToolRecord
from .app import (
    JsonOpt,
    _errors,
    _ms,
    _out,
    _pct,
    _print_json,
    _registry,
    _state,
    _table,
    _text,
    _when,
    add_app,
    app,
    check_store_url,
)


@app.command()
def init(as_json: JsonOpt = False) -> None:
    """Create the registry, or upgrade an existing one in place (data is kept)."""
    _state.as_json = as_json
    with _errors():
        settings = Settings.load(url=_state.db, tenant=_state.tenant)
        check_store_url(settings.resolved_url, creating=True)
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


StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict", help="All or nothing: fail on any tool that cannot be imported as written."
    ),
]


def _report_added(outcomes: list[PutOutcome], as_json: bool) -> None:
    skipped = getattr(outcomes, "skipped", [])
    repaired = getattr(outcomes, "repaired", [])
    if as_json:
        document: dict[str, Any] = {
            "tools": [
                {"name": o.record.name, "version": o.record.version, "status": o.status}
                for o in outcomes
            ]
        }
        if hasattr(outcomes, "skipped"):
            document["skipped"] = [{"tool": s.tool, "reason": s.reason} for s in skipped]
            document["repaired"] = [{"tool": r.tool, "reason": r.reason} for r in repaired]
        _print_json(document)
        _none_imported(outcomes, skipped)
        return
    for item in repaired:
        _out.print(f"  repaired {_text(item.tool)}: {_text(item.reason)}")
    for item in skipped:
        _out.print(f"  skipped  {_text(item.tool)}: {_text(item.reason)}")
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
        + (f"; {len(skipped)} skipped, {len(repaired)} repaired" if skipped or repaired else "")
    )
    _none_imported(outcomes, skipped)


def _none_imported(outcomes: list[PutOutcome], skipped: list[Any]) -> None:
    """Exit 2 when every tool was skipped: nothing was imported."""
    if skipped and not outcomes:
        first = skipped[0]
        sys.stderr.write(f"error: no tool could be imported ({first.tool}: {first.reason})\n")
        raise typer.Exit(2)


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
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Register the tools of a manifest, then embed the new ones.

    A tool that is invalid is skipped, and a parameter default of the wrong type is
    coerced losslessly ("250" for an integer) or dropped; each is listed with its
    reason. --strict: all or nothing. Files past manifest_max_bytes are refused.
    """
    from .selection import embedding_progress

    with _registry(as_json) as registry, embedding_progress(as_json) as progress:
        outcomes = registry.add_manifest(file, strict=strict, progress=progress)
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
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Register every tool of an MCP server: `add mcp --name NAME -- COMMAND ARGS...`
    or `add mcp --name NAME --url URL`.

    A tool that cannot be imported (a name too long, a remote $ref, two names that
    collide) is skipped and listed with its reason; --strict: all or nothing.
    """
    with _registry(as_json) as registry:
        outcomes = registry.add_mcp(
            name, command=command or None, url=url, env=env or (), category=category,
            timeout_s=timeout, strict=strict,
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
    """List the tenant's tools (`--kind skill` or `--kind agent`: its skills or agents)."""
    if kind in ("skill", "agent"):
        _list_definitions(kind, as_json)
        return
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


def _list_definitions(kind: str, as_json: bool) -> None:
    with _registry(as_json) as registry:
        names = [
            spec.name
            for spec in (
                registry.skills(include_disabled=True)
                if kind == "skill"
                else registry.agents(include_disabled=True)
            )
        ]
        records = [registry.definition(kind, name) for name in names]
    if as_json:
        _print_json({f"{kind}s": records})
        return
    table = _table("name", "v", "enabled", "description")
    for r in records:
        state = "yes" if r["enabled"] else f"no: {r['disabled_reason']}"
        description = str(r["definition"].get("description") or "")
        table.add_row(_text(r["name"]), str(r["version"]), _text(state), _text(description))
    _out.print(table)
    _out.print(f"{len(records)} {kind}s")


@app.command()
def show(
    first: KindOrName,
    second: NameAfterKind = None,
    version: Annotated[int | None, typer.Option(help="Show this older version.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a tool (schema, statistics, versions), a skill or an agent (`show agent NAME`)."""
    with _registry(as_json) as registry:
        kind, name = _target(first, second)
        if kind != "tool":
            record = registry.definition(kind, name, version)
        else:
            tool = registry.get(name)
            versions = registry.versions(name)
            shown = registry.version(name, version).spec if version is not None else tool.spec
    if kind != "tool":
        _print_definition(record, as_json)
        return
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


def _print_definition(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(record)
        return
    state = "enabled" if record["enabled"] else f"disabled: {record['disabled_reason']}"
    _out.print(f"[bold]{record['kind']} {_text(record['name'])}[/bold]  "
               f"v{record['shown_version']} of {record['version']}  ({_text(state)})")  # fmt: skip
    for key, value in record["definition"].items():
        if value not in (None, "", [], {}):
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            _out.print(f"  {key:12} {_text(text)}")
    for v in record["versions"]:
        _out.print(
            f"  version {v['version']:<4} {v['content_hash'][:12]}  {_when(v['created_at'])}"
        )


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


KindOrName = Annotated[
    str, typer.Argument(help="A tool's name, or a kind (tool, skill, agent) then a name.")
]
NameAfterKind = Annotated[str | None, typer.Argument(help="The name, after a kind.")]


def _target(first: str, second: str | None) -> tuple[str, str]:
    """``NAME`` (a tool) or ``KIND NAME``."""
    if second is None:
        return "tool", first
    if first not in ("tool", "skill", "agent"):
        raise UsageError(f"kind must be tool, skill or agent, got {first!r}")
    return first, second


def _toggle(first: str, second: str | None, as_json: bool, verb: str, **options: bool) -> None:
    with _registry(as_json) as registry:
        kind, name = _target(first, second)
        if kind == "tool":
            tool_actions = {"enabled": registry.enable, "disabled": registry.disable}
            if verb == "removed":
                registry.remove(name, **options)
            else:
                tool_actions[verb](name)
        elif verb == "enabled":
            registry.enable_definition(kind, name)
        elif verb == "disabled":
            registry.disable_definition(kind, name)
        else:
            registry.remove_definition(kind, name)
    if as_json:
        _print_json({"kind": kind, "name": name, "action": verb})
    else:
        _out.print(f"{verb} {kind} {_text(name)}")


@app.command()
def enable(first: KindOrName, second: NameAfterKind = None, as_json: JsonOpt = False) -> None:
    """Enable a tool (`enable NAME`), a skill or an agent (`enable skill NAME`)."""
    _toggle(first, second, as_json, "enabled")


@app.command()
def disable(first: KindOrName, second: NameAfterKind = None, as_json: JsonOpt = False) -> None:
    """Disable a tool, skill or agent: it stays registered but is not offered or run."""
    _toggle(first, second, as_json, "disabled")


@app.command()
def remove(
    first: KindOrName,
    second: NameAfterKind = None,
    force: Annotated[
        bool, typer.Option("--force", help="Remove a tool even if skills or agents use it.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove a tool (its recorded calls are kept), a skill or an agent, with its versions."""
    _toggle(first, second, as_json, "removed", **({"force": True} if force else {}))


@app.command()
def call(
    name: Annotated[str, typer.Argument(help="Tool name.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    timeout: Annotated[
        float | None, typer.Option(help="Seconds before the tool is stopped.")
    ] = None,
    run_id: Annotated[str | None, typer.Option(help="Record the call under this run id.")] = None,
    task: Annotated[
        str | None, typer.Option(help="What the call was for: selection learns from it.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Call a tool: bind the arguments, run it, record the call."""
    with _registry(as_json) as registry:
        result = registry.call(name, args, timeout_s=timeout, run_id=run_id, task=task)
    if as_json:
        _print_json(result.model_dump(mode="json"))
    elif result.success:
        sys.stdout.write(result.output + ("\n" if not result.output.endswith("\n") else ""))
    else:
        sys.stderr.write(f"tool failed: {result.error}\n")
    raise typer.Exit(0 if result.success else 1)


@app.command()
def stats(
    runs: Annotated[
        bool,
        typer.Option("--runs", help="Runs per day and agent: how many a limit stopped."),
    ] = False,
    days: Annotated[int, typer.Option(min=1, help="With --runs: how many days back.")] = 7,
    as_json: JsonOpt = False,
) -> None:
    """Per-tool usage, success rate and latency (with --runs: runs per day and agent)."""
    if runs:
        _run_stats(days, as_json)
        return
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


def _run_stats(days: int, as_json: bool) -> None:
    with _registry(as_json) as registry:
        rows = registry.run_stats(days)
    if as_json:
        _print_json({"days": days, "runs": rows})
        return
    table = _table("day", "agent", "runs", "limit hit", "share", "error", "interrupted")
    for row in rows:
        table.add_row(
            row["day"], _text(row["agent"]), str(row["runs"]), str(row["partial"]),
            _pct(row["limit_share"]), str(row["error"]), str(row["interrupted"]),
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
