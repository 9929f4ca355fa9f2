"""Agent commands of the ``tooldb`` CLI: ``run``, ``runs``, ``add skill``, ``add agent``,
``skills``, ``agents``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from ..types import RunResult, RunStatus
from . import workers
from .app import (
    JsonOpt,
    _errors,
    _ms,
    _out,
    _print_json,
    _registry,
    _table,
    _text,
    _when,
    add_app,
    app,
)


@app.command()
def run(
    task: Annotated[
        list[str],
        typer.Argument(help="The task in plain language; or 'show RUN_ID' to print a run."),
    ],
    agent: Annotated[str | None, typer.Option(help="Run as this registered agent.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="provider:model (e.g. openai:gpt-4o-mini); default: the setting."),
    ] = None,
    tool_choice: Annotated[
        str | None, typer.Option(help="auto | required | required:TOOL | none (LLM loop only).")
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Router: candidates to try.")] = 5,
    max_iterations: Annotated[
        int | None, typer.Option(min=1, help="LLM loop: model turns at most.")
    ] = None,
    max_tool_calls: Annotated[
        int | None, typer.Option(min=1, help="LLM loop: tool calls at most.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0.001, help="LLM loop: wall-clock seconds at most.")
    ] = None,
    args: Annotated[
        str | None,
        typer.Option("--args", help='Router: arguments as JSON, e.g. \'{"end": "2024-03-01"}\'.'),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a task: the LLM tool-calling loop with a model, the router (no LLM) without.

    Without a model, a task that lacks a required argument is declined (nothing runs)
    naming the tool and what is missing; --args supplies it, and on a terminal (without
    --json) you are asked for it. Exit code 0 when the run succeeds, 1 when it fails,
    declines or stops at a limit (partial).
    """
    if len(task) == 2 and task[0] == "show":
        return show_run(task[1], as_json)
    from ..agents import run_task
    from ..agents.telemetry import exporting_spans

    text = " ".join(task)
    limits = {"max_iterations": max_iterations, "max_tool_calls": max_tool_calls,
              "timeout_s": timeout}  # fmt: skip
    with _registry(as_json) as registry, _errors(), exporting_spans():
        supplied = _arguments_option(args)
        ask = _ask_on_terminal if not as_json and _interactive() else None
        result = run_task(registry, text, agent=agent, model=model, tool_choice=tool_choice, k=k,
                          limits={n: v for n, v in limits.items() if v is not None},
                          arguments=supplied, ask=ask)  # fmt: skip
    if as_json:
        _print_json(_result_json(result))
    else:
        _print_result(result)
    if result.status is not RunStatus.SUCCESS:
        raise typer.Exit(1)


def _interactive() -> bool:
    """Whether a person can answer a prompt (stdin is a terminal)."""
    return sys.stdin.isatty()


def _arguments_option(text: str | None) -> dict[str, Any] | None:
    """``--args``: a JSON object, or a UsageError saying what is wrong with it."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise UsageError(f"--args must be a JSON object, got {type(value).__name__}")
    return value


def _ask_on_terminal(tool: str, parameter: str, schema: dict[str, Any]) -> Any:
    """Ask for one missing required argument; an empty answer leaves it missing. A JSON
    value is taken as such (``[1, 2]``), anything else as text (binding coerces "42")."""
    hint = schema.get("description") or schema.get("type") or ""
    answer = typer.prompt(f"{tool}: {parameter}" + (f" ({hint})" if hint else ""), default="",
                          show_default=False, err=True)  # fmt: skip
    if not answer.strip():
        return None
    try:
        return json.loads(answer)
    except json.JSONDecodeError:
        return answer


def show_run(run_id: str, as_json: bool) -> None:
    from ..agents.run_log import resolve_run_id
    from ..errors import NotFound

    with _registry(as_json) as registry, _errors():
        run_id = resolve_run_id(registry.store, registry.tenant, run_id)
        details = registry.store.get_run_details(registry.tenant, run_id)
        if details is None:
            raise NotFound(f"no run {run_id!r} in tenant {registry.tenant!r}")
        messages = registry.store.run_messages(run_id)
        children = registry.store.list_runs(registry.tenant, parent_run_id=run_id, limit=1000)
        plan = _plan_of(registry, run_id)
    details["plan"] = plan
    details["messages"] = messages
    details["children"] = [child.id for child in children]
    if as_json:
        _print_json(details)
        return
    _out.print(f"run {details['id']}  {details['status']}  ({details['mode']}"
               f"{', ' + details['model'] if details['model'] else ''})")  # fmt: skip
    _out.print(f"task: {_text(details['task'])}")
    if details["parent_run_id"]:
        _out.print(f"parent: {details['parent_run_id']}")
    for message in messages:
        role = message["role"]
        if message.get("content"):
            _out.print(f"[{message['iteration']}] {role}: {_text(message['content'][:500])}")
        for call in message.get("tool_calls") or []:
            _out.print(f"[{message['iteration']}] {role} calls {_text(call['name'])}"
                       f"({_text(call.get('arguments', '{}')[:200])})")  # fmt: skip
    if plan:
        from ..builtins.planning import render

        _out.print("plan:\n" + _text(render(plan)))
    data = details["data"] if isinstance(details.get("data"), dict) else {}
    for link in data.get("retries") or []:  # the needs_retry chain (agents/protocol.py)
        step = f"{link['from']} -> {link['target']} ({link['attempt']} of {link['cap']})"
        _out.print(_text(f"retry: {step}: {link['refinement']} -> {link.get('outcome')}"))
    if details["requires_review"]:
        _out.print(f"requires review: {_text(details['review_reason'] or '')}")
    metadata = details["metadata"] if isinstance(details.get("metadata"), dict) else {}
    for slow in metadata.get("slow_calls") or []:  # agents/slow_calls.py
        from ..agents.slow_calls import SlowCall

        _out.print(_text(f"warning: {SlowCall(**slow).warning()}"))
    for child in children:
        _out.print(f"child run {child.id} {child.status.value}")


def _plan_of(registry: Any, run_id: str) -> list[dict[str, Any]] | None:
    """The steps the ``plan`` built-in kept with the run (None when it kept none)."""
    from ..builtins.rows import get_plan

    return get_plan(registry.store, registry.tenant, run_id)


@app.command()
def runs(
    action: Annotated[
        list[str] | None, typer.Argument(help="'show RUN_ID' prints one run; nothing lists runs.")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="How many, newest first.")] = 20,
    status: Annotated[
        str | None,
        typer.Option(
            help="Only runs with this status: running, success, error, partial, interrupted."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recent agent runs, newest first, then runs submitted to workers (queued, running,
    finished, and the worker); ``tooldb runs show|wait|cancel RUN_ID``."""
    if action:
        if len(action) != 2 or action[0] not in ("show", "wait", "cancel"):
            with _errors():
                raise UsageError(
                    "expected 'tooldb runs show RUN_ID' (or 'wait RUN_ID', 'cancel RUN_ID' "
                    f"for a submitted run), got {' '.join(action)!r}"
                )
        if action[0] != "show":
            return workers.runs_action(action, as_json)
        return show_run(action[1], as_json)
    with _registry(as_json) as registry:
        records = registry.store.list_runs(registry.tenant, status=status, limit=limit)
        with _errors():
            submitted = workers.submitted(registry, limit) if status is None else []
    if as_json:
        listed = {"runs": [r.model_dump(mode="json") for r in records]}
        _print_json(listed | ({"submitted": [s.__dict__ for s in submitted]} if submitted else {}))
        return
    if submitted:
        workers.print_submitted(submitted, as_json)
    table = _table("id", "started", "status", "mode", "calls", "ms", "task")
    for r in records:
        took = (r.ended_at - r.started_at) * 1000 if r.ended_at else None
        table.add_row(r.id[:12], _when(r.started_at), r.status.value, r.mode, str(r.tool_calls),
                      _ms(took) if took is not None else "-", _text(r.task[:60]))  # fmt: skip
    _out.print(table)


AllowMissing = Annotated[
    bool,
    typer.Option(
        "--allow-missing",
        help="Register it even if tools or skills it names are missing: disabled, with why.",
    ),
]


@add_app.command("skill")
def add_skill(
    path: Annotated[Path, typer.Argument(help="A SKILL.md file or a folder of them.")],
    allow_missing: AllowMissing = False,
    as_json: JsonOpt = False,
) -> None:
    """Register skills from SKILL.md files (YAML front matter + instructions). A skill
    naming tools or skills the tenant lacks is refused, each missing name listed."""
    with _registry(as_json) as registry, _errors():
        changed = registry.add_skill(path, allow_missing=allow_missing)
    if as_json:
        _print_json({"changed": changed})
    else:
        _out.print(f"{len(changed)} skill(s) new or changed: {', '.join(changed) or '-'}")


@add_app.command("agent")
def add_agent(
    file: Annotated[Path, typer.Argument(help="Agent YAML: name, instructions, model, skills...")],
    as_tool: Annotated[
        bool,
        typer.Option("--as-tool", help="Also register it as a tool (kind agent) others can call."),
    ] = False,
    allow_missing: AllowMissing = False,
    as_json: JsonOpt = False,
) -> None:
    """Register an agent definition (with --as-tool or `as_tool: true`, also as a tool)."""
    from ..registry.skills import read_agent

    with _registry(as_json) as registry, _errors():
        spec = read_agent(file)
        if as_tool and not spec.as_tool:
            spec = spec.model_copy(update={"as_tool": True})
        changed = registry.add_agent(spec, allow_missing=allow_missing)
    if as_json:
        _print_json({"agent": spec.name, "changed": changed, "as_tool": spec.as_tool})
    else:
        suffix = " (and as a tool)" if spec.as_tool else ""
        _out.print(f"agent {spec.name} {'registered' if changed else 'unchanged'}{suffix}")


@app.command()
def skills(as_json: JsonOpt = False) -> None:
    """Registered skills."""
    with _registry(as_json) as registry:
        specs = registry.skills()
    if as_json:
        _print_json({"skills": [s.model_dump(mode="json") for s in specs]})
        return
    table = _table("name", "tools", "depends on", "description")
    for s in specs:
        tools = ", ".join(f"{t.name}:{t.access.value}" for t in s.tools)
        table.add_row(_text(s.name), _text(tools), ", ".join(s.depends_on), _text(s.description))
    _out.print(table)


@app.command()
def agents(as_json: JsonOpt = False) -> None:
    """Registered agents."""
    with _registry(as_json) as registry:
        specs = registry.agents()
    if as_json:
        _print_json({"agents": [s.model_dump(mode="json") for s in specs]})
        return
    table = _table("name", "model", "skills", "description")
    for s in specs:
        table.add_row(_text(s.name), s.model or "(router)", ", ".join(s.skills),
                      _text(s.description or s.instructions[:60]))  # fmt: skip
    _out.print(table)


def _result_json(result: RunResult) -> dict[str, Any]:
    data = result.model_dump(mode="json", exclude={"data"})
    return data


def _print_result(result: RunResult) -> None:
    plan = result.plan or {}
    for call in plan.get("calls") or []:
        why = "; ".join(
            f"{k}={v!r} ({call['why'].get(k, '')})" for k, v in call["arguments"].items()
        )
        sys.stderr.write(f"  {call['tool']}: {why or 'no arguments'}\n")
    for use in result.tool_calls:
        mark = "ok" if use.success else "failed"
        sys.stderr.write(f"  {use.tool} {mark}{'' if use.success else ': ' + (use.error or '')}\n")
    if result.output:
        _out.print(_text(result.output))
    for warning in result.warnings:
        sys.stderr.write(_text(f"warning: {warning}") + "\n")
    if result.status is not RunStatus.SUCCESS:
        reason = result.review_reason or result.error or ""
        sys.stderr.write(f"run {result.run_id} {result.status.value}: {reason}\n")
