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

The state contract (``reads``/``writes`` in the agent's YAML): the child is given the
keys it reads (in its task text and as its LoopContext's state), may write only the
keys it declares, and its status and payload land in the caller's state as
``<agent>_status`` and ``<agent>_result``. A write outside the contract, or a final
answer that is an envelope (a JSON object with a ``status``) that does not validate,
is an ``error`` the caller sees, and nothing of the child's state is kept.

Agents calling agents are bounded: a chain deeper than ``agent_max_depth`` or an
agent that would (transitively) call itself is refused with the chain named.
"""

from __future__ import annotations

import copy
import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..context import current_context, use_context
from ..errors import ExecutionError, UsageError
from ..executors import Rendered
from ..executors.agent import agent_tool_parameters
from ..models import Model, load_model
from ..types import AgentSpec, LoopContext, RunResult, RunStatus
from .router import Router
from .run import INHERIT, ROUTER, agent_loop, agent_model, router_names

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


class Envelope(BaseModel):
    """The status protocol's final answer, validated: a JSON object with a ``status``
    is an envelope, and one that does not validate is an error, not a plain answer."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["success", "error", "needs_retry"]
    message: str = ""
    refinement: str | None = None
    target: str | None = None
    #: The payload (what lands in ``<agent>_result``; the message when absent).
    data: Any = None


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
    parent = current_context()
    shared = parent.state if parent is not None else {}
    given = {k: shared[k] for k in spec.reads or () if k in shared}
    child_state = given_copy(given) if spec.has_contract else shared
    before = _fingerprints(child_state) if spec.has_contract else {}
    task = _task_text(arguments, given if spec.reads else None)
    token = _CHAIN.set((*chain, agent))
    try:
        result = await _run(registry, spec, task, parent, child_state)
    finally:
        _CHAIN.reset(token)
    status = status_of(result)
    if spec.has_contract:
        problem = _contract_problem(spec, before, child_state)
        if problem is not None:
            status = {**status, "status": "error", "message": problem, "data": None}
        else:
            _write_back(spec, before, child_state, shared)
    shared[f"{agent}_status"] = status["status"]
    shared[f"{agent}_result"] = status["message"] if status.get("data") is None else status["data"]
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
    base: dict[str, Any] = {"refinement": None, "target": None, "data": None}
    base["run_id"] = result.run_id
    if result.status is RunStatus.SUCCESS:
        stated = _stated(result)
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


def _stated(result: RunResult) -> dict[str, Any] | None:
    """The agent's own status, when its final answer is an envelope (a JSON object with
    a ``status``: the text, or a router agent's tool data); one that does not validate
    is an error naming what is wrong."""
    value: Any = result.data if isinstance(result.data, dict) else None
    if value is None or "status" not in value:
        text = result.output.strip()
        if not (text.startswith("{") and text.endswith("}")):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
    if not isinstance(value, dict) or "status" not in value:
        return None
    try:
        envelope = Envelope.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'envelope'}: {e['msg']}" for e in exc.errors()
        )
        return {
            "status": "error",
            "message": f"agent {result.agent!r} answered an envelope that does not validate: "
            f"{problems}",
        }
    return {
        "status": envelope.status,
        "message": envelope.message,
        "refinement": _text_or_none(envelope.refinement),
        "target": _text_or_none(envelope.target),
        "data": envelope.data,
    }


def _text_or_none(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _task_text(arguments: dict[str, Any], state: dict[str, Any] | None = None) -> str:
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        raise UsageError("an agent tool needs a non-empty 'task'")
    context = arguments.get("context")
    if context:
        facts = json.dumps(context, ensure_ascii=False, indent=1, default=str)
        task = f"{task}\n\nContext:\n{facts}"
    if state:
        known = json.dumps(state, ensure_ascii=False, indent=1, default=str)
        task = f"{task}\n\nState you read:\n{known}"
    return task


def given_copy(values: dict[str, Any]) -> dict[str, Any]:
    """The child's own state: a copy, so its writes reach the caller only through the
    contract's check (JSON values deep-copied; anything else shared)."""
    return {key: copy.deepcopy(value) for key, value in values.items()}


def _fingerprints(state: dict[str, Any]) -> dict[str, str]:
    return {key: json.dumps(value, sort_keys=True, default=repr) for key, value in state.items()}


def _changed(before: dict[str, str], state: dict[str, Any]) -> set[str]:
    after = _fingerprints(state)
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def _contract_problem(spec: AgentSpec, before: dict[str, str], state: dict[str, Any]) -> str | None:
    undeclared = sorted(_changed(before, state) - set(spec.writes or ()))
    if not undeclared:
        return None
    return (
        f"agent {spec.name!r} wrote state key(s) {undeclared} outside its contract "
        f"(writes: {spec.writes or []}); nothing it wrote was kept"
    )


def _write_back(
    spec: AgentSpec, before: dict[str, str], state: dict[str, Any], shared: dict[str, Any]
) -> None:
    for key in _changed(before, state):
        if key in state:
            shared[key] = state[key]
        else:
            shared.pop(key, None)


async def _run(
    registry: Registry,
    spec: AgentSpec,
    task: str,
    parent: LoopContext | None,
    state: dict[str, Any],
) -> RunResult:
    """The agent's own loop (its model, else the router) as a child of the calling run,
    with ``state`` as its LoopContext's state."""
    given: str | Model | None = parent.model if parent is not None else None
    if spec.model not in (None, INHERIT, ROUTER):
        given = None  # an agent that names its model runs on it
    if spec.model is None:
        given = None  # unset: the ``model`` setting, else the router (as before)
    chosen = agent_model(registry, spec, given)
    if parent is not None:
        parent = parent.model_copy(update={"state": state})
    if chosen is None:
        router = Router(registry, names=router_names(registry, spec))
        child = LoopContext(
            run_id=parent.run_id if parent else "",
            iteration=0,
            is_subagent=parent is not None,
            parent_run_id=parent.run_id if parent else None,
            agent=spec.name,
        )
        child.state = state
        with use_context(child):  # its tools see the child's state
            return await router.arun(
                task, agent=spec.name, parent_run_id=parent.run_id if parent else None
            )
    model = load_model(chosen, registry.settings) if isinstance(chosen, str) else chosen
    return await agent_loop(registry, spec, model).arun(task, parent=parent)
