"""Worker commands of the ``tooldb`` CLI: ``submit``, ``worker``, and the submitted-run
parts of ``runs`` (``runs wait ID``, ``runs cancel ID``, queued runs in the list).
PostgreSQL registries only (docs/scale.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import UsageError
from ..types import RunStatus
from .app import JsonOpt, _errors, _out, _print_json, _registry, _table, _text, _when, app

if TYPE_CHECKING:
    from ..registry import Registry
    from ..workers.submit import SubmittedRun


@app.command()
def submit(
    task: Annotated[list[str], typer.Argument(help="The task in plain language.")],
    agent: Annotated[str | None, typer.Option(help="Run as this registered agent.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="provider:model, or python:module:function; default: the agent's."),
    ] = None,
    tool_choice: Annotated[str | None, typer.Option(help="auto, required or none.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Enqueue a task for the workers (`tooldb worker`) and print its run id at once."""
    with _registry(as_json) as registry:
        run_id = registry.submit(" ".join(task), agent=agent, model=model, tool_choice=tool_choice)
    if as_json:
        _print_json({"run_id": run_id, "status": "queued"})
    else:
        _out.print(run_id)


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(min=1, help="Runs this worker executes at once.")] = 8,
    tenant_concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Runs of one tenant running at once across all workers."),
    ] = None,
) -> None:
    """Execute submitted runs until stopped (Ctrl-C / SIGTERM); start one per core or
    host, all pointing at the same PostgreSQL registry."""
    with _registry(False) as registry:
        with _errors():
            from ..workers.engine import require_dbos, system_database_url

            system_database_url(registry)  # SQLite: the clear error, before dbos loads
            require_dbos()
            from ..workers.worker import Worker

            running = Worker(
                registry, concurrency=concurrency, tenant_concurrency=tenant_concurrency
            )
        _out.print(f"worker {running.executor_id}: waiting for runs (Ctrl-C stops)")
        running.run_forever()


def runs_action(action: list[str], as_json: bool) -> None:
    """``tooldb runs wait ID`` and ``tooldb runs cancel ID``."""
    verb, run_id = action
    with _registry(as_json) as registry, _errors():
        if verb == "cancel":
            registry_cancel(registry, run_id)
            result = None
        else:
            result = registry.wait(run_id)
    if result is None:
        if as_json:
            _print_json({"run_id": run_id, "status": "cancelled"})
        else:
            _out.print(f"cancelled {run_id}")
        return
    if as_json:
        _print_json(result.model_dump(mode="json"))
    else:
        _out.print(f"{result.status.value}: {_text(result.output or result.error or '')}")
    if result.status is not RunStatus.SUCCESS:
        raise typer.Exit(1)


def registry_cancel(registry: Registry, run_id: str) -> None:
    from ..workers import cancel

    cancel(registry, run_id)


def submitted(registry: Registry, limit: int) -> list[SubmittedRun]:
    """The tenant's submitted runs (none on SQLite, or before anything was submitted)."""
    try:
        from ..workers.engine import system_database_url

        system_database_url(registry)
    except UsageError:
        return []
    try:
        import dbos  # noqa: F401
    except ImportError:
        return []
    from ..workers import submitted_runs
    from ..workers.submit import has_queue

    return submitted_runs(registry, limit) if has_queue(registry) else []


def print_submitted(rows: list[SubmittedRun], as_json: bool) -> None:
    if as_json:
        _print_json({"submitted": [row.__dict__ for row in rows]})
        return
    table = _table("id", "submitted", "status", "worker", "task")
    for row in rows:
        table.add_row(row.id[:12], _when(row.submitted_at), row.status, row.worker or "-",
                      _text(row.task[:60]))  # fmt: skip
    _out.print(table)
