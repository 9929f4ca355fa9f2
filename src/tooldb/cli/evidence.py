"""Learning-from-use commands of the ``tooldb`` CLI: ``evidence list/forget``, ``feedback``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from ..errors import UsageError
from .app import JsonOpt, _out, _print_json, _registry, _table, _text, app

evidence_app = typer.Typer(
    help="The tasks each tool served or failed, which selection learns from.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(evidence_app, name="evidence")


@evidence_app.command("list")
def list_evidence(
    tool: Annotated[str | None, typer.Option(help="Only this tool's evidence.")] = None,
    limit: Annotated[int, typer.Option(min=0, help="How many, most recently seen first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Stored tasks per tool: how often each served (good) or failed (bad) it."""
    with _registry(as_json) as registry:
        rows = registry.evidence(tool=tool, limit=limit)
    if as_json:
        _print_json({"evidence": [
            {"id": r.id, "tool": r.tool, "task": r.task, "good": r.good, "bad": r.bad,
             "created_at": r.created_at, "last_seen": r.last_seen, "embedder": r.embedder}
            for r in rows
        ]})  # fmt: skip
        return
    table = _table("id", "tool", "good", "bad", "last seen", "task")
    for r in rows:
        seen = datetime.fromtimestamp(r.last_seen, UTC).strftime("%Y-%m-%d %H:%M")
        table.add_row(
            str(r.id), _text(r.tool), f"{r.good:g}", f"{r.bad:g}", seen, _text(r.task[:200])
        )
    _out.print(table)


@evidence_app.command("forget")
def forget(
    tool: Annotated[str | None, typer.Option(help="Erase this tool's evidence.")] = None,
    ids: Annotated[
        list[int] | None, typer.Option("--id", help="Erase this row (repeatable).")
    ] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Erase all of the tenant's evidence.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Erase evidence: a tool's (--tool), some rows (--id), or the tenant's (--all)."""
    with _registry(as_json) as registry:
        if not (tool or ids or everything):
            raise UsageError("say what to forget: --tool NAME, --id N, or --all")
        if everything and (tool or ids):
            raise UsageError("--all erases everything: give it alone")
        deleted = registry.forget_evidence(tool=tool, ids=ids or None)
    if as_json:
        _print_json({"deleted": deleted})
    else:
        _out.print(f"forgot {deleted} stored task(s)")


@app.command()
def feedback(
    decision: Annotated[int, typer.Argument(help="The decision id `select` printed.")],
    tool: Annotated[str, typer.Argument(help="The tool the feedback is about.")],
    good: Annotated[bool, typer.Option("--good/--bad", help="Did the tool serve the task?")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Tell selection whether a tool served a selection's task (it learns from it)."""
    with _registry(as_json) as registry:
        learned = registry.feedback(decision, tool, good=good)
    if as_json:
        _print_json({"decision": decision, "tool": tool, "good": good, "learned": learned})
    elif learned:
        verdict = "served" if good else "did not serve"
        _out.print(f"noted: {_text(tool)} {verdict} the task of decision {decision}")
    else:
        _out.print("not learned: selection learns only with an embedder and select_learning on")
