"""Submitting runs to workers, waiting for them, cancelling them and listing them: all
through a DBOS client on the registry's database (no workflow code runs here)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, UsageError
from ..types import RunResult, RunStatus
from .engine import APP_VERSION, QUEUE_NAME, SCHEMA, WORKFLOW_NAME, client_for

if TYPE_CHECKING:
    from ..registry import Registry

#: DBOS's workflow statuses as tooldb names them.
STATUS_NAMES = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "CANCELLED": "cancelled",
    "ERROR": "error",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "error",
}


def submit(
    registry: Registry,
    task: str,
    *,
    agent: str | None = None,
    model: str | None = None,
    tool_choice: str | None = None,
) -> str:
    """Enqueue ``task`` for a worker; its run id, at once. ``model`` must be a string
    (``provider:model``): a worker in another process builds it."""
    if not isinstance(task, str) or not task.strip():
        raise UsageError("the task must be a non-empty string")
    if model is not None and not isinstance(model, str):
        raise UsageError(
            "a submitted run names its model by a string (provider:model, or "
            "python:module:function for a model built in code): workers build it"
        )
    if agent is not None:
        registry.agent(agent)  # an unknown agent is the caller's mistake: raise now
    run_id = uuid.uuid4().hex
    request = {
        "tenant": registry.tenant,
        "task": task,
        "agent": agent,
        "model": model,
        "tool_choice": tool_choice,
        "submitted_at": time.time(),
    }
    client_for(registry).enqueue(
        {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": QUEUE_NAME,
            "workflow_id": run_id,
            "app_version": APP_VERSION,
            "queue_partition_key": registry.tenant,
            "attributes": {"tenant": registry.tenant},
        },
        request,
    )
    return run_id


def _status(registry: Registry, run_id: str) -> Any:
    found = client_for(registry).list_workflows(
        workflow_ids=[run_id], attributes={"tenant": registry.tenant}, load_output=False
    )
    if not found:
        raise NotFound(f"no submitted run {run_id!r} in tenant {registry.tenant!r}")
    return found[0]


def wait(registry: Registry, run_id: str, timeout_s: float | None = None) -> RunResult:
    """Block until the submitted run ends; its result (TimeoutError past ``timeout_s``)."""
    _status(registry, run_id)  # another tenant's run, or none: NotFound
    client = client_for(registry)
    handle: Any = client.retrieve_workflow(run_id)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = handle.get_status()
        if status.status in ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            break
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"run {run_id} still {STATUS_NAMES.get(status.status)}")
        time.sleep(0.05)
    if status.status == "SUCCESS":
        out = dict(handle.get_result())
        out.pop("worker", None)
        return RunResult.model_validate(out)
    error = str(status.error) if status.error else f"the run ended {status.status}"
    if status.status == "CANCELLED":
        error = "the run was cancelled"
    return RunResult(
        run_id=run_id,
        status=RunStatus.INTERRUPTED if status.status == "CANCELLED" else RunStatus.ERROR,
        error=error,
        requires_review=True,
        review_reason=error,
    )


def cancel(registry: Registry, run_id: str) -> None:
    """Cancel a queued or running run (a running one stops at its next model turn)."""
    _status(registry, run_id)
    client_for(registry).cancel_workflow(run_id)


def _request(inputs: Any) -> dict[str, Any]:
    """The request a run was submitted with, from DBOS's record of its inputs."""
    args = inputs.get("args") if isinstance(inputs, dict) else getattr(inputs, "args", None)
    if args and isinstance(args[0], dict):
        return args[0]
    return {}


def has_queue(registry: Registry) -> bool:
    """Whether anything was ever submitted to this database (DBOS's schema exists)."""
    import sqlalchemy as sa

    engine = registry.store.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("SELECT 1 FROM information_schema.schemata WHERE schema_name = :name"),
            {"name": SCHEMA},
        ).first()
    return found is not None


@dataclass
class SubmittedRun:
    id: str
    status: str
    task: str
    agent: str | None
    worker: str | None
    submitted_at: float
    updated_at: float


def submitted_runs(registry: Registry, limit: int = 20) -> list[SubmittedRun]:
    """The tenant's submitted runs, newest first, with the worker that ran them."""
    rows = client_for(registry).list_workflows(
        name=WORKFLOW_NAME,
        attributes={"tenant": registry.tenant},
        limit=limit,
        sort_desc=True,
        load_output=True,
    )
    out = []
    for row in rows:
        request = _request(row.input)
        status = STATUS_NAMES.get(row.status, "")
        if row.status == "SUCCESS" and isinstance(row.output, dict):
            status = str(row.output.get("status", "success"))
        out.append(
            SubmittedRun(
                id=row.workflow_id,
                status=status or row.status.lower(),
                task=str(request.get("task", "")),
                agent=request.get("agent"),
                worker=row.executor_id if row.status != "ENQUEUED" else None,
                submitted_at=(row.created_at or 0) / 1000,
                updated_at=(row.updated_at or 0) / 1000,
            )
        )
    return out
