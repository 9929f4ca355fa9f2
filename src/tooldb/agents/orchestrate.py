"""Agents as tools: a registered agent called like any tool, and what it answers.

Calling an ``agent`` tool runs that agent on the ``task`` argument as a child run of
the caller's run (or a run of its own when called directly). The child sees the
caller's shared ``state`` (``LoopContext.state``: one dict for the whole run tree,
persisted with each run), and answers with the status protocol of DESIGN §3:

    {"status": "success" | "error" | "needs_retry", "message": str,
     "refinement": str | None, "target": str | None}

An agent states its status by ending with that JSON object as its final answer;
a plain-text answer is a success whose message is the text. A child run that stops
at a limit answers ``needs_retry`` with the limit as the refinement (a narrower task
may fit), one that fails answers ``error``. The calling loop hands ``needs_retry`` to
its model with the refinement, counting it against the tool's retry budget.

Agents calling agents are bounded: a chain deeper than ``agent_max_depth`` or an
agent that would (transitively) call itself is refused with the chain named.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..context import current_context
from ..errors import ExecutionError, UsageError
from ..executors import Rendered
from ..executors.agent import agent_tool_parameters
from ..models import load_model
from ..types import AgentSpec, RunResult, RunStatus
from .limits import Limits
from .loop import AgentLoop
from .router import Router

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["AgentStatusError", "agent_tool_parameters", "run_agent_tool", "status_of"]

STATUSES = ("success", "error", "needs_retry")
#: The agents running in this call chain, outermost first.
_CHAIN: ContextVar[tuple[str, ...]] = ContextVar("tooldb_agent_chain", default=())


class AgentStatusError(ExecutionError):
    """An agent tool answered ``error`` or ``needs_retry``: the call failed, and its
    ``data`` still carries the status (the calling loop reads ``needs_retry`` from it)."""

    def __init__(self, message: str, data: dict[str, Any]) -> None:
        super().__init__(message)
        self.data = data


async def run_agent_tool(registry: Registry, agent: str, arguments: dict[str, Any]) -> Rendered:
    """Run ``agent`` on the call's task; a Rendered status on success, else raise
    AgentStatusError (error, needs_retry) or ExecutionError (recursion)."""
    chain = _CHAIN.get()
    if agent in chain:
        raise ExecutionError(f"agent {agent!r} would call itself: {' -> '.join([*chain, agent])}")
    limit = registry.settings.agent_max_depth
    if len(chain) >= limit:
        raise ExecutionError(
            f"agents nested {len(chain) + 1} deep ({' -> '.join([*chain, agent])}): the limit "
            f"is agent_max_depth = {limit}"
        )
    spec = registry.agent(agent)
    task = _task_text(arguments)
    token = _CHAIN.set((*chain, agent))
    try:
        result = await _run(registry, spec, task)
    finally:
        _CHAIN.reset(token)
    status = status_of(result)
    if status["status"] == "success":
        return Rendered(status["message"], status)
    text = f"{status['status']}: {status['message']}"
    if status["refinement"]:
        text += f" (refine: {status['refinement']})"
    if status["target"]:
        text += f" (target: {status['target']})"
    raise AgentStatusError(text, status)


def status_of(result: RunResult) -> dict[str, Any]:
    """A finished child run as the status protocol (plus the child's run id)."""
    base: dict[str, Any] = {"refinement": None, "target": None, "run_id": result.run_id}
    if result.status is RunStatus.SUCCESS:
        stated = _stated(result.output)
        if stated is not None:
            return {**base, **stated}
        return {**base, "status": "success", "message": result.output}
    if result.status is RunStatus.PARTIAL:
        return {
            **base,
            "status": "needs_retry",
            "message": result.output or "the agent stopped before an answer",
            "refinement": f"{result.review_reason}: give it a narrower task",
        }
    return {**base, "status": "error", "message": result.error or result.review_reason or ""}


def _stated(output: str) -> dict[str, Any] | None:
    """The agent's own status, when its final answer is the protocol's JSON object."""
    text = output.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("status") not in STATUSES:
        return None
    return {
        "status": value["status"],
        "message": str(value.get("message") or ""),
        "refinement": _text_or_none(value.get("refinement")),
        "target": _text_or_none(value.get("target")),
    }


def _text_or_none(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _task_text(arguments: dict[str, Any]) -> str:
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        raise UsageError("an agent tool needs a non-empty 'task'")
    context = arguments.get("context")
    if context:
        facts = json.dumps(context, ensure_ascii=False, indent=1, default=str)
        return f"{task}\n\nContext:\n{facts}"
    return task


async def _run(registry: Registry, spec: AgentSpec, task: str) -> RunResult:
    """The agent's own loop (its model, else the router) as a child of the calling run."""
    parent = current_context()
    model = spec.model or registry.settings.model
    if not model:
        names = list(spec.tools or [])
        for skill in spec.skills:
            names.extend(grant.name for grant in registry.skill(skill).tools)
        router = Router(registry, names=names or None)
        return await router.arun(
            task, agent=spec.name, parent_run_id=parent.run_id if parent else None
        )
    loop = AgentLoop(
        registry,
        load_model(model, registry.settings),
        instructions=spec.instructions,
        tools=spec.tools,
        skills=spec.skills,
        search_tools=spec.search_tools,
        subagents=spec.subagents,
        limits=Limits.from_settings(registry.settings).updated(spec.limits),
        tool_choice=spec.tool_choice,
        agent=spec.name,
    )
    return await loop.arun(task, parent=parent)
