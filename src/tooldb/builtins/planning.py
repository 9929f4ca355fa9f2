"""Planning group: ``plan`` keeps the steps of a task's plan with the agent run (table
``run_plans``), so the progress of a long task is in the registry: ``tooldb runs show``
prints it, the trace holds every ``plan`` call, and a restarted task can read the plan
of the interrupted run by its id."""

from __future__ import annotations

import threading
from typing import Any, Literal

from ..decorators import tool
from ..errors import UsageError
from .common import registry_settings, run_context_agent
from .rows import get_plan, put_plan

GROUP = {"builtin": "planning"}
STATUSES = ("pending", "in_progress", "done", "skipped")
MAX_STEPS = 100
MAX_STEP_CHARS = 2000
#: One plan change at a time in this process: the calls of one turn run in parallel, and
#: two ``complete`` calls reading the same plan would each write back only their own step.
#: (A run's calls all run in its process.)
_CHANGING = threading.Lock()
MARKS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]", "skipped": "[-]"}


def render(steps: list[dict[str, Any]]) -> str:
    """The plan as a checklist, one numbered line per step."""
    if not steps:
        return "no plan yet"
    lines = []
    for step in steps:
        note = f"  ({step['note']})" if step.get("note") else ""
        lines.append(f"{step['n']}. {MARKS.get(step['status'], '[?]')} {step['text']}{note}")
    return "\n".join(lines)


def _texts(steps: list[str] | None) -> list[str]:
    if not steps:
        raise UsageError("'steps' must list at least one step (a short sentence each)")
    cleaned = [s.strip() for s in steps if isinstance(s, str) and s.strip()]
    if len(cleaned) != len(steps):
        raise UsageError("'steps' must be non-empty strings")
    if any(len(s) > MAX_STEP_CHARS for s in cleaned):
        raise UsageError(f"each of 'steps' must be at most {MAX_STEP_CHARS} characters")
    return cleaned


@tool(category="planning", metadata=GROUP)
def plan(
    action: Literal["create", "add", "update", "complete", "list"] = "list",
    steps: list[str] | None = None,
    step: int = 0,
    status: Literal["pending", "in_progress", "done", "skipped"] | None = None,
    note: str = "",
    run_id: str = "",
) -> dict[str, Any]:
    """Keep a step-by-step plan for the current task, saved with the run: create it at
    the start of a multi-step task, mark steps in_progress/done as you go, and list it
    to see what is left. Returns the plan as a numbered checklist and its steps.

    Args:
        action: create (replace the plan with steps), add (append steps), update (set a
            step's status or note), complete (mark a step done), list (show the plan).
        steps: The steps' texts, for create and add.
        step: The step number (1-based), for update and complete.
        status: New status for update: pending, in_progress, done or skipped.
        note: A short note on the step (what was found, why skipped), for update/complete.
        run_id: Only with list: read the plan of another run of this tenant (e.g. an
            interrupted one) instead of the current run's.
    """
    registry, _ = registry_settings()
    current, _agent = run_context_agent()
    if run_id and action != "list":
        raise UsageError("'run_id' only reads another run's plan (action 'list')")
    target = run_id or current
    if not target:
        raise UsageError(
            "plan is kept with an agent run: call it from a run (tooldb run, an agent, "
            "a sub-agent), or give 'run_id' with action 'list' to read a run's plan"
        )
    with _CHANGING:
        return _apply(registry, target, run_id, action, steps, step, status, note)


def _apply(
    registry: Any,
    target: str,
    run_id: str,
    action: str,
    steps: list[str] | None,
    step: int,
    status: str | None,
    note: str,
) -> dict[str, Any]:
    """The read, change and write of one ``plan`` call (under ``_CHANGING``)."""
    found = get_plan(registry.store, registry.tenant, target)
    if found is None and run_id:
        raise UsageError(f"'run_id' {run_id!r} has no plan in tenant {registry.tenant!r}")
    steps_now = found or []
    if action == "create":
        steps_now = [{"n": i, "text": t, "status": "pending", "note": ""}
                     for i, t in enumerate(_texts(steps), 1)]  # fmt: skip
    elif action == "add":
        start = len(steps_now)
        steps_now = steps_now + [{"n": start + i, "text": t, "status": "pending", "note": ""}
                                 for i, t in enumerate(_texts(steps), 1)]  # fmt: skip
    elif action in ("update", "complete"):
        if not 1 <= step <= len(steps_now):
            raise UsageError(
                f"'step' must be a step number from 1 to {len(steps_now)}, got {step}"
                if steps_now
                else "there is no plan yet: create it first (action 'create' with 'steps')"
            )
        new_status = "done" if action == "complete" else status
        if action == "update" and new_status is None and not note:
            raise UsageError("update needs a 'status' or a 'note'")
        chosen = dict(steps_now[step - 1])
        if new_status:
            chosen["status"] = new_status
        if note:
            chosen["note"] = note[:MAX_STEP_CHARS]
        steps_now = [*steps_now[: step - 1], chosen, *steps_now[step:]]
    if len(steps_now) > MAX_STEPS:
        raise UsageError(f"a plan has at most {MAX_STEPS} steps")
    if action != "list":
        put_plan(registry.store, registry.tenant, target, steps_now)
    left = sum(1 for s in steps_now if s["status"] in ("pending", "in_progress"))
    return {"run_id": target, "plan": render(steps_now), "steps": steps_now, "remaining": left}
