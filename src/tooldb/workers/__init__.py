"""Past one machine: runs submitted to a queue in the registry's PostgreSQL and executed
by worker processes on any number of hosts, durably (DBOS workflows whose steps are the
model turns; each tool call's result kept with its record). See docs/scale.md.

Importing this package does not import ``dbos``: ``submit``/``wait``/``cancel`` load it
when called, ``tooldb.workers.worker`` when imported (the ``workers`` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..registry import Registry
    from ..types import RunResult
    from .submit import SubmittedRun


def submit(
    registry: Registry,
    task: str,
    *,
    agent: str | None = None,
    model: str | None = None,
    tool_choice: str | None = None,
) -> str:
    from .submit import submit as enqueue

    return enqueue(registry, task, agent=agent, model=model, tool_choice=tool_choice)


def wait(registry: Registry, run_id: str, timeout_s: float | None = None) -> RunResult:
    from .submit import wait as block

    return block(registry, run_id, timeout_s)


def cancel(registry: Registry, run_id: str) -> None:
    from .submit import cancel as stop

    stop(registry, run_id)


def submitted_runs(registry: Registry, limit: int = 20) -> list[SubmittedRun]:
    from .submit import submitted_runs as listed

    return listed(registry, limit)


__all__ = ["cancel", "submit", "submitted_runs", "wait"]
