"""``tooldb add pack NAME`` and ``tooldb packs``: worked agent systems in one step."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from .app import JsonOpt, _errors, _out, _print_json, _registry, _table, _text, add_app, app


@add_app.command("pack")
def add_pack(
    name: Annotated[str, typer.Argument(help="The pack's name (see `tooldb packs`).")],
    database: Annotated[
        str | None,
        typer.Option(
            "--database", help="The pack's own database URL (default: a SQLite file it creates)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Register a pack: its tools, skills and agents, and create its database."""
    from ..packs import install

    with _registry(as_json) as registry, _errors():
        report = install(registry, name, database)
    if as_json:
        _print_json(asdict(report))
        return
    _out.print(
        f"pack {report.name}: {len(report.tools)} tool(s), {len(report.skills)} skill(s), "
        f"{len(report.agents)} agent(s); database {report.database_url}"
    )


@app.command()
def packs(as_json: JsonOpt = False) -> None:
    """The packs this installation ships."""
    from ..packs import available

    with _errors():
        found = available()
    if as_json:
        _print_json({"packs": [{"name": k, "description": v} for k, v in found.items()]})
        return
    table = _table("pack", "description")
    for name, description in found.items():
        table.add_row(name, _text(description))
    _out.print(table)
