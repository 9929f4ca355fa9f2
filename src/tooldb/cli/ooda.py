"""OODA commands of the ``tooldb`` CLI: ``ooda run|findings|history|undo|trend|schedule`` and
``add builtins``."""

from __future__ import annotations

import sys
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Annotated, Any

import typer

from ..ooda.scheduler import Every
from ..ooda.types import Act, Finding, OodaReport
from ..registry import Registry
from .app import (
    JsonOpt,
    _errors,
    _ms,
    _out,
    _pct,
    _print_json,
    _registry,
    _table,
    _text,
    _when,
    add_app,
    app,
)

ooda_app = typer.Typer(
    help="Self-optimisation: analyse the call log, report findings, disable failing tools "
    "(every act audited and reversible).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(ooda_app, name="ooda")

WaitOpt = Annotated[
    float | None,
    typer.Option(
        "--wait", min=0, help="Seconds to wait for another cycle of the tenant (default: none)."
    ),
]


@ooda_app.command("run")
def run(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Change nothing; show what would be done.")
    ] = False,
    wait: WaitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Analyse the window, record the figures, report findings and apply the policy."""
    with _registry(as_json) as registry:
        report = registry.ooda(dry_run=dry_run, wait_s=wait)
    if as_json:
        _print_json(report.model_dump(mode="json", exclude_none=True))
        return
    _print_report(report)


@ooda_app.command("findings")
def findings(as_json: JsonOpt = False) -> None:
    """Findings of a fresh analysis of the window (changes nothing)."""
    with _registry(as_json) as registry:
        found = registry.ooda.findings()
    if as_json:
        _print_json({"findings": [f.as_json() for f in found]})
        return
    _print_findings(found)


@ooda_app.command("history")
def history(
    limit: Annotated[int, typer.Option(min=0, help="How many acts, newest first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Every act: OODA's disables, undos and re-enables by hand, with their reasons."""
    with _registry(as_json) as registry:
        acts = registry.ooda.history(limit)
    if as_json:
        _print_json({"acts": [a.model_dump(mode="json") for a in acts]})
        return
    _print_acts(acts)


@ooda_app.command("undo")
def undo(
    act_id: Annotated[int, typer.Argument(help="The act to reverse (see `ooda history`).")],
    as_json: JsonOpt = False,
) -> None:
    """Reverse an act: a disabled tool is enabled again (recorded as an act)."""
    with _registry(as_json) as registry:
        act = registry.ooda.undo(act_id)
    if as_json:
        _print_json(act.model_dump(mode="json"))
        return
    _out.print(f"act {act.id}: {act.action}d {_text(act.tool)} ({_text(act.reason)})")


@ooda_app.command("trend")
def trend(
    name: Annotated[str, typer.Argument(help="Tool name.")],
    limit: Annotated[int, typer.Option(min=1, help="How many analyses, newest first.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """A tool's windowed figures at each analysis (the time series)."""
    with _registry(as_json) as registry:
        rows = registry.ooda.trend(name, limit)
    if as_json:
        _print_json({"tool": name, "analyses": rows})
        return
    table = _table("analysed", "calls", "success", "avg ms", "p50 ms", "p95 ms")
    for row in rows:
        avg = row["duration_ms"] / row["calls"] if row["calls"] else None
        table.add_row(
            _when(row["analyzed_at"]), str(row["calls"]), _pct(row["success_rate"]), _ms(avg),
            _ms(row["p50_ms"]), _ms(row["p95_ms"]),
        )  # fmt: skip
    _out.print(table)


@ooda_app.command("schedule")
def schedule(
    every: Annotated[
        str, typer.Option("--every", help="Interval between cycles: 90, 90s, 15m, 1h, 1d.")
    ] = "1h",
) -> None:
    """Run cycles on a schedule in the foreground (for systemd or cron's @reboot): any
    number of these may run against one store; one leads and runs the cycles, the others
    stand by and take over within three heartbeats if it dies. One line per event."""
    import signal

    from ..ooda.leader import Event, ScheduleLeader, parse_interval

    with _errors():
        seconds = parse_interval(every)
    with _registry(False) as registry:

        def say(event: Event) -> None:
            _out.print(f"{_when(time.time())} {event.detail}")

        leader = ScheduleLeader(
            registry.store, registry.tenant, registry.ooda, seconds, on_event=say
        )
        signal.signal(signal.SIGTERM, lambda *_: leader.stop())
        try:
            leader.run()
        except KeyboardInterrupt:
            leader.stop()


@add_app.command("builtins")
def add_builtins(
    groups: Annotated[
        list[str] | None,
        typer.Argument(
            help="Groups: diagnostics planning memory research code reasoning charts (the "
            "default: all of these), and only by name: workspace shell git github."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Register groups of built-in tools (docs/builtins.md); the dangerous groups
    (workspace, shell, git, github) only when named."""
    from ..builtins import add_builtins as register_groups
    from .tools import _report_added

    with _registry(as_json) as registry:
        outcomes = register_groups(registry, groups or ())
    _report_added(outcomes, as_json)


def _print_report(report: OodaReport) -> None:
    what = "dry run" if report.dry_run else f"cycle {report.cycle_id}"
    _out.print(
        f"{what}: {report.tools_analyzed} tools, {report.calls_analyzed} calls from "
        f"{_when(report.window_start)} to {_when(report.window_end)} "
        f"({report.duration_ms:.0f} ms)"
    )
    for note in report.notes:
        _out.print(f"note: {_text(note)}")
    _print_findings(report.findings)
    if report.acts:
        _out.print("would do:" if report.dry_run else "done:")
        _print_acts(report.acts)
    for held in report.held:
        _out.print(f"held  {_text(held.tool)}: {_text(held.reason)}")


def _print_findings(found: list[Finding]) -> None:
    if not found:
        _out.print("no findings")
        return
    table = _table("kind", "tool", "enabled", "summary")
    for f in found:
        summary = f.summary
        if f.alternatives:
            summary += "; try " + ", ".join(
                f"{a.tool} ({_pct(a.success_rate)})" for a in f.alternatives
            )
        table.add_row(f.kind.value, _text(f.tool), "yes" if f.enabled else "no", _text(summary))
    _out.print(table)


def _print_acts(acts: list[Act]) -> None:
    table = _table("id", "when", "tool", "action", "by", "undone", "reason")
    for a in acts:
        table.add_row(
            "-" if a.id is None else str(a.id), _when(a.created_at), _text(a.tool), a.action,
            f"{a.actor}/{a.policy}", f"by {a.undone_by}" if a.undone_at else "-", _text(a.reason),
        )  # fmt: skip
    _out.print(table)


def ooda_schedule(registry: Registry, seconds: float | None) -> AbstractContextManager[Any]:
    """Cycles every ``seconds`` beside a server (nothing when None), logged on stderr:
    stdout may be the MCP protocol stream."""
    if seconds is None:
        return nullcontext()

    def logged(report: OodaReport) -> None:
        sys.stderr.write(
            f"ooda: cycle {report.cycle_id}: {report.tools_analyzed} tools, "
            f"{len(report.findings)} findings, {len(report.acts)} acts\n"
        )

    return Every(seconds, registry.ooda, name="ooda", on_result=logged)
