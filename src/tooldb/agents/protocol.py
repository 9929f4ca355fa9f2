"""``needs_retry`` with a ``target``: tooldb re-runs the target, then the tool that asked.

An agent tool (or any tool whose ``data`` is the status envelope) may answer
``{"status": "needs_retry", "refinement": ..., "target": ...}``. With no target, or
itself as the target, the calling model is told and the retry counts against the
tool's own budget (``max_retries_per_tool``), as before. With another tool as the
target (an agent tool such as a SQL writer, or any tool offered in the run):

1. the target is re-run with the refinement: an agent tool gets its last task in this
   run (else the run's task) with ``context.refinement`` and ``context.feedback``;
   another tool gets its last arguments, plus ``refinement`` if it takes one;
2. the tool that asked is re-run with the same arguments; if it asks again, again;
3. each target has a cap (the orchestrator's ``retries: {target: N}``, else
   ``max_retries_per_tool``): past it nothing more runs, the model is told, and the
   run, however it ends, ends ``partial`` and flagged for review.

Every re-run is a recorded call of the run, and the chain (who asked, the target, the
refinement, the attempt, the outcome) is kept in the run's data (``retries``):
``tooldb runs show`` prints it and ``tooldb trace`` shows the calls.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..models.base import ToolCall
from ..types import ToolKind, ToolResult

if TYPE_CHECKING:
    from .loop import _Run
    from .turn import TurnContext


async def on_needs_retry(
    run: _Run, name: str, arguments: dict[str, Any], result: ToolResult, context: TurnContext
) -> ToolResult:
    """What the calling model gets for ``name``'s needs_retry (see the module)."""
    status = result.data
    target = status.get("target") if isinstance(status, dict) else None
    if not target or target == name:
        return retry_hint(run, name, result)
    if target not in run.toolbox.offered:
        text = (
            f"{result.error} (its target {target!r} is not a tool of this run: retry it "
            "yourself with the refinement)"
        )
        return retry_hint(run, name, result.model_copy(update={"error": text}))
    cap = run.loop.retry_caps.get(target, run.limits.max_retries_per_tool)
    used = run.target_retries[target]
    refinement = str(status.get("refinement") or "") if isinstance(status, dict) else ""
    link: dict[str, Any] = {
        "from": name,
        "target": target,
        "refinement": refinement,
        "attempt": used + 1,
        "cap": cap,
        "from_call_id": result.call_id,
    }
    run.retries.append(link)
    if used >= cap:
        link["outcome"] = "cap reached"
        run.flagged = (
            f"retry cap reached: {target!r} was re-run {cap} time(s) for {name!r} and "
            f"{name!r} still answers needs_retry ({refinement})"
        )
        text = f"{result.error} (retry cap of {cap} for {target!r} reached: flagged for review)"
        return result.model_copy(update={"error": text, "output": text})
    run.target_retries[target] += 1
    target_arguments = _refined_arguments(run, target, refinement, status)
    target_result = await run._dispatch(target, target_arguments, context)
    _remember(run, target, target_arguments, target_result)
    link["target_call_id"] = target_result.call_id
    head = (
        f"{name}: {result.error}\n-> re-ran {target!r} with the refinement "
        f"(retry {used + 1} of {cap}): "
    )
    if not target_result.success:
        link["outcome"] = "target failed"
        text = f"{head}failed: {target_result.error}"
        return ToolResult.failure(text).model_copy(
            update={"data": target_result.data, "call_id": result.call_id}
        )
    head += f"ok: {target_result.output[:500]}\n-> {name} again: "
    again = await run._dispatch(name, arguments, context)  # may ask again: bounded by the cap
    _remember(run, name, arguments, again)
    link["outcome"] = "success" if again.success else "failed again"
    link["retry_call_id"] = again.call_id
    if again.success:
        return again.model_copy(update={"output": head + again.output})
    text = head + f"failed: {again.error}"
    return again.model_copy(update={"error": text, "output": text})


def retry_hint(run: _Run, name: str, result: ToolResult) -> ToolResult:
    """An agent tool asked for a narrower or clearer task of its own (``needs_retry``
    with no other target): the model is told so, and it counts against the tool's
    retry budget (shared with argument errors)."""
    run.argument_errors[name] += 1
    left = run.limits.max_retries_per_tool - run.argument_errors[name] + 1
    hint = (
        f" (call {name!r} again with the task refined as asked: {left} "
        f"{'retry' if left == 1 else 'retries'} left)"
        if left > 0
        else " (no retries left for this tool)"
    )
    text = f"{result.error}{hint}"
    return result.model_copy(update={"error": text, "output": text})


def _refined_arguments(
    run: _Run, target: str, refinement: str, status: dict[str, Any]
) -> dict[str, Any]:
    last: dict[str, Any] | None = None
    for use in reversed(run.history):
        if use.tool == target and isinstance(use.arguments, dict):
            last = dict(use.arguments)
            break
    record = run.toolbox.records[target]
    if record.spec.kind is ToolKind.AGENT:
        arguments = last or {"task": run.task}
        given = arguments.get("context")
        extra = {"refinement": refinement, "feedback": str(status.get("message") or "")}
        arguments["context"] = {**(given if isinstance(given, dict) else {}), **extra}
        return arguments
    arguments = last or {}
    if "refinement" in (record.spec.parameters.get("properties") or {}):
        arguments["refinement"] = refinement
    return arguments


def _remember(run: _Run, tool: str, arguments: dict[str, Any], result: ToolResult) -> None:
    call = ToolCall(id=f"retry_{len(run.history)}", name=tool, arguments=json.dumps(arguments))
    run.calls_made += 1  # a re-run is a tool call of the run: it counts against the budget
    run._remember(call, arguments, result)
