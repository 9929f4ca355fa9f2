"""Provenance commands of the ``tooldb`` CLI: ``trace RUN_ID`` and ``explain CALL_ID``."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.tree import Tree

from ..errors import UsageError
from .app import JsonOpt, _errors, _ms, _out, _print_json, _registry, _text, app


@app.command()
def trace(
    run_id: Annotated[str, typer.Argument(help="The run to trace (see `tooldb runs`).")],
    cypher: Annotated[
        bool, typer.Option("--cypher", help="Print the graph as Cypher statements for Neo4j.")
    ] = False,
    push: Annotated[
        bool, typer.Option("--push", help="Write the graph to the Neo4j server in settings.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """A run as a tree: task, selection decisions, calls and results, child runs."""
    from ..agents.run_log import resolve_run_id
    from ..provenance.export import push as push_graph
    from ..provenance.export import to_cypher

    with _registry(as_json) as registry, _errors():
        if cypher and push:
            raise UsageError("--cypher and --push are two ways out: choose one")
        run_id = resolve_run_id(registry.store, registry.tenant, run_id)
        found = registry.trace(run_id)
        if push:
            sent = push_graph(found.graph, registry.settings)
    if cypher:
        sys.stdout.write(to_cypher(found.graph))
    elif push:
        if as_json:
            _print_json({"run_id": run_id, "pushed": sent})
        else:
            _out.print(f"pushed {sent['nodes']} nodes and {sent['relationships']} relationships")
    elif as_json:
        _print_json(found.model_dump(mode="json"))
    else:
        _out.print(_run_tree(found.tree))


@app.command()
def explain(
    call_id: Annotated[str, typer.Argument(help="A recorded call's id (see `tooldb calls`).")],
    as_json: JsonOpt = False,
) -> None:
    """Walk back from a call to the run, the task and the selection that chose the tool."""
    with _registry(as_json) as registry, _errors():
        found = registry.explain(call_id)
    if as_json:
        _print_json(found.model_dump(mode="json"))
        return
    _out.print(_text(found.summary))
    call = found.call
    _out.print(f"call {call['call_id']}: {_text(call['tool'])} v{call['tool_version']}"
               f" {_args(call['arguments'])} -> {_outcome(call)}")  # fmt: skip
    if found.decision is not None:
        _out.print(f"decision {found.decision['decision_id']}: {_text(found.decision['task'])}")
        for candidate in found.decision["candidates"][:5]:
            _out.print(f"  {_candidate(candidate, found.decision['chosen'], call['tool'])}")
    for run in found.ancestors:
        _out.print(f"under run {run['id']} ({run['status']}): {_text(run['task'][:80])}")
    for act in found.acts:
        _out.print(f"ooda act {act['id']}: {act['action']} ({_text(act['reason'])})")


def _run_tree(run: dict[str, Any]) -> Tree:
    head = (
        f"run {run['run_id']} [{run['status']}] {run['mode']}"
        + (f" {run['model']}" if run["model"] else "")
        + (f" agent {run['agent']}" if run["agent"] else "")
        + (f" {_ms(run['duration_ms'])} ms" if run["duration_ms"] is not None else "")
    )
    tree = Tree(_text(head))
    tree.add(f"task: {_text(run['task'][:200])}")
    for skill in run["skills_loaded"]:
        tree.add(f"loaded skill {_text(skill)}")
    for link in run.get("retries") or []:  # needs_retry re-runs (agents/protocol.py)
        step = f"{link['from']} -> {link['target']} ({link['attempt']} of {link['cap']})"
        tree.add(_text(f"retry: {step}: {link['refinement']} -> {link.get('outcome')}"))
    if run.get("state"):  # its short values: statuses, a chart's path ...
        branch = tree.add("state")
        for key, value in run["state"].items():
            branch.add(_text(f"{key} = {value}"))
    for event in run["events"]:
        if event["type"] == "decision":
            branch = tree.add(
                f"decision {event['decision_id']}: select k={event['k']}"
                f" ({_ms(event['duration_ms'])} ms)"
            )
            for candidate in event["candidates"][:5]:
                branch.add(_text(_candidate(candidate, event["chosen"], None)))
        elif event["type"] == "call":
            where = f"[{event['iteration']}] " if event["iteration"] is not None else ""
            tree.add(
                _text(
                    f"{where}call {event['call_id']} {event['tool']}"
                    f" {_args(event['arguments'])} -> {_outcome(event)}"
                    f" ({_ms(event['duration_ms'])} ms)"
                )
            )
        else:
            tree.add(_run_tree(event))
    if run["output"]:
        tree.add(f"output: {_text(run['output'][:200])}")
    if run["review_reason"]:
        tree.add(f"requires review: {_text(run['review_reason'])}")
    return tree


def _candidate(candidate: dict[str, Any], chosen: str | None, called: str | None) -> str:
    marks = []
    if candidate["name"] == chosen:
        marks.append("chosen")
    if candidate["name"] == called:
        marks.append("this call")
    dense = "-" if candidate["dense"] is None else f"{candidate['dense']:.3f}"
    return (
        f"{candidate['rank']}. {candidate['name']} final {candidate['final']:.3f}"
        f" (dense {dense}, lexical {candidate['lexical']:.2f}, success"
        f" {candidate['success']:.2f}, latency {candidate['latency']:.2f})"
        + (f" {candidate['evidence']}" if candidate.get("evidence") else "")
        + (f" <- {', '.join(marks)}" if marks else "")
    )


def _args(arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _outcome(call: dict[str, Any]) -> str:
    if call["success"]:
        return f"ok {(call['output'] or '')[:80]!r}"
    return f"failed: {(call['error'] or '')[:120]}"
