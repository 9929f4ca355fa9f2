"""Tools that ask the runtime for their run, session and tenant (tests/test_runtime_context.py)."""

from __future__ import annotations

from typing import Annotated

from tooldb import Runtime, tool


@tool(category="reasoning")
def note_thought(
    thought: str,
    run_id: Annotated[str | None, Runtime("run_id")] = None,
    session: Annotated[str, Runtime("session_id")] = "",
    tenant: Annotated[str, Runtime("tenant")] = "",
) -> dict[str, str | None]:
    """Record a thought of the current reasoning session.

    Args:
        thought: The thought to record.
    """
    return {"thought": thought, "run_id": run_id, "session": session, "tenant": tenant}


@tool
def needs_a_run(run_id: Annotated[str, Runtime("run_id")]) -> str:
    """Only meaningful inside an agent run."""
    return run_id


@tool
def where_am_i(
    run_id: Annotated[str | None, Runtime("run_id")] = None,
    agent: Annotated[str | None, Runtime("agent")] = None,
    iteration: Annotated[int | None, Runtime("iteration")] = None,
    parent_run_id: Annotated[str | None, Runtime("parent_run_id")] = None,
) -> dict[str, object]:
    """Where this call stands: its run, agent, iteration and parent run."""
    return {"run_id": run_id, "agent": agent, "iteration": iteration, "parent": parent_run_id}
