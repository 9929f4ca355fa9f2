"""A submitted run as a DBOS workflow whose steps are its model turns and tool calls.

The agent loop runs unchanged (agents/loop.py); two seams make it durable: its model is
wrapped so each turn is a step (``StepModel``), and its ``call_tool`` runs each call as
steps (``durable_call``). A worker that dies mid-run leaves the workflow ``PENDING``;
another worker recovers it (worker.py) and DBOS re-executes the workflow function, which
replays the loop: every step whose output was checkpointed returns that output without
running again (no model asked twice, no completed call run twice), so the loop reaches
the step where the dead worker stopped and goes on from there.

A tool call is one step: it runs the tool (which records the call in tooldb) and
checkpoints its result. A model turn's checkpoint carries a token naming the execution
that made it; a call whose body runs after a turn made by an earlier execution may have
been in flight when that execution's worker died. It looks for the call's record (the
call completed and was recorded but not checkpointed) and reuses it; without one, a tool
whose metadata says ``idempotent: false`` is not run again blindly: the run ends
``interrupted`` with ``requires_review``. Idempotent tools are run again.

The run's row and messages are rewritten by a replay (the replayed loop writes them
again); the records of calls are not, since replayed calls do not run.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from dbos import DBOS

from ..agents.run import task_loop
from ..errors import ArgumentError, ToolDBError
from ..models.base import Message, Model, ModelTurn, ToolChoice, ToolSchema
from ..stores.schema import calls, run_messages, runs
from ..types import AgentSpec, RunResult, RunStatus, ToolResult
from . import state
from .engine import WORKFLOW_NAME

if TYPE_CHECKING:
    from ..registry import Registry


class CallInterrupted(BaseException):
    """A call of a non-idempotent tool was in flight when its worker died: the run ends
    ``interrupted`` rather than run it again (BaseException: it ends the run, it is not
    a tool error the model is told about)."""


#: The token of the model turn whose calls the current task makes: which execution
#: checkpointed it (a nonce) and when. Set by the turn, read by its calls (asyncio
#: tasks copy the context they start in: the calls start after their turn).
_TURN: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "tooldb_turn", default=None
)


class StepModel:
    """A model whose every turn is a DBOS step: a resumed run is not asked again. The
    step's output carries a token saying which execution made it and when: a turn that
    an earlier execution made tells its calls they may have been in flight."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.id = inner.id

    async def complete(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> ModelTurn:
        nonce = uuid.uuid4().hex

        async def turn() -> dict[str, Any]:
            made = await self.inner.complete(messages, tools, tool_choice)
            return {"turn": made.model_dump(mode="json"), "nonce": nonce, "at": time.time()}

        data = await DBOS.run_step_async({"name": "model_turn"}, turn)
        _TURN.set({"earlier": data["nonce"] != nonce, "at": data["at"]})
        return ModelTurn.model_validate(data["turn"])


def durable_call(registry: Registry) -> Any:
    """The loop's ``call_tool`` for a run of ``registry``'s tenant: the call as one step.
    Its body runs only if no execution checkpointed it; when the turn that asked for it
    was made by an earlier execution, the call may have been in flight when that
    execution's worker died: its record is looked for (then reused), and a tool that
    is not idempotent is not run again."""

    async def call_tool(name: str, arguments: dict[str, Any], run_id: str) -> ToolResult:
        turn = _TURN.get() or {"earlier": False, "at": time.time()}
        outcome = await DBOS.run_step_async(
            {"name": f"tool:{name}"}, step_body, registry, name, arguments, run_id, turn
        )
        if "argument_error" in outcome:
            raise ArgumentError(outcome["argument_error"])
        if "error" in outcome:
            raise ToolDBError(outcome["error"])
        if "interrupted" in outcome:
            raise CallInterrupted(outcome["interrupted"])
        return ToolResult.model_validate(outcome["result"])

    return call_tool


async def step_body(
    registry: Registry, name: str, arguments: dict[str, Any], run_id: str, turn: dict[str, Any]
) -> dict[str, Any]:
    """What a call's step does when no execution checkpointed it (its output: JSON)."""
    if turn["earlier"]:  # the call may have been in flight when a worker died
        found = _recorded(registry, run_id, name, arguments, turn["at"])
        if found is not None:
            return {"result": found.model_dump(mode="json")}
        if not _idempotent(registry, name):
            return {"interrupted": name}
    try:
        result = await registry.acall(name, arguments, run_id=run_id)
    except ArgumentError as exc:
        return {"argument_error": str(exc)}
    except ToolDBError as exc:
        return {"error": str(exc)}
    return {"result": result.model_dump(mode="json")}


def _idempotent(registry: Registry, name: str) -> bool:
    try:
        tool = registry.get(name)
    except ToolDBError:
        return True  # gone: running it again fails cleanly
    return tool.spec.metadata.get("idempotent", True) is not False


def _recorded(
    registry: Registry, run_id: str, name: str, arguments: dict[str, Any], since: float
) -> ToolResult | None:
    """The record of this run's call of ``name`` with these arguments that started after
    the call began (it completed, but its worker died before the step's checkpoint)."""
    query = (
        sa.select(
            calls.c.id,
            calls.c.success,
            calls.c.error,
            calls.c.output_preview,
            calls.c.duration_ms,
            calls.c.arguments,
        )
        .where(
            calls.c.tenant == registry.tenant,
            calls.c.run_id == run_id,
            calls.c.tool_name == name,
            calls.c.started_at >= since - 1.0,  # clocks of two hosts: a second's slack
        )
        .order_by(calls.c.id)
    )
    with registry.store.engine.connect() as conn:  # type: ignore[attr-defined]
        for row in conn.execute(query):
            recorded = row.arguments if isinstance(row.arguments, dict) else {}
            if all(recorded.get(key) == value for key, value in arguments.items()):
                return ToolResult(
                    success=row.success,
                    output=row.output_preview or (row.error or ""),
                    error=row.error,
                    duration_ms=row.duration_ms,
                    call_id=row.id,
                )
    return None


def restart_run(registry: Registry, run_id: str) -> None:
    """Drop what an earlier execution of this run wrote to its row and messages: the
    replay writes them again (its calls' records stay: replayed calls do not run)."""
    engine = registry.store.engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        exists = conn.execute(
            sa.select(runs.c.id).where(runs.c.tenant == registry.tenant, runs.c.id == run_id)
        ).first()
        if exists is None:
            return
        conn.execute(run_messages.delete().where(run_messages.c.run_id == run_id))
        conn.execute(runs.delete().where(runs.c.tenant == registry.tenant, runs.c.id == run_id))


def _mark_interrupted(registry: Registry, run_id: str, tool: str) -> str:
    reason = (
        f"tool {tool!r} (idempotent: false) was running when its worker stopped; it may or "
        "may not have taken effect, so it was not run again: review before re-running"
    )
    engine = registry.store.engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.execute(
            runs.update()
            .where(runs.c.tenant == registry.tenant, runs.c.id == run_id)
            .values(review_reason=reason, error=reason)
        )
    return reason


#: A run whose worker dies this many times (a tool that crashes its process, say) ends
#: ``error`` rather than take down worker after worker.
MAX_ATTEMPTS = 10


@DBOS.workflow(name=WORKFLOW_NAME, max_recovery_attempts=MAX_ATTEMPTS)
def tooldb_run(request: dict[str, Any]) -> dict[str, Any]:
    """One submitted run, executed (or resumed) by a worker: on a thread of DBOS's pool
    with an event loop of its own, so the run's blocking store writes hold up no other
    run (async workflows would all share one loop)."""
    with state.tenant_slot(request["tenant"]):
        return asyncio.run(_workflow(request))


async def _workflow(request: dict[str, Any]) -> dict[str, Any]:
    run_id = DBOS.workflow_id
    assert run_id is not None
    registry = state.registry_for(request["tenant"])
    restart_run(registry, run_id)
    task: str = request["task"]
    agent = request.get("agent")
    try:
        result = await _run(registry, run_id, task, agent, request.get("model"),
                            request.get("tool_choice"))  # fmt: skip
    except CallInterrupted as stop:
        reason = _mark_interrupted(registry, run_id, str(stop))
        result = RunResult(
            run_id=run_id, status=RunStatus.INTERRUPTED, task=task, agent=agent,
            requires_review=True, review_reason=reason, error=reason,
        )  # fmt: skip
    except ToolDBError as exc:  # the caller's mistake (unknown agent, model): the run says so
        result = RunResult(
            run_id=run_id, status=RunStatus.ERROR, task=task, agent=agent,
            error=str(exc), requires_review=True, review_reason=str(exc),
        )  # fmt: skip
    out = result.model_dump(mode="json", exclude={"data"})
    out["worker"] = state.executor_id()
    return out


async def _run(
    registry: Registry,
    run_id: str,
    task: str,
    agent: str | None,
    model: str | None,
    tool_choice: str | None,
) -> RunResult:
    spec: AgentSpec | None = registry.agent(agent) if agent else None
    loop = task_loop(
        registry, spec, model, tool_choice=tool_choice, call_tool=durable_call(registry)
    )
    if loop is None:  # no model anywhere: the router, in one step (it asks no model)

        async def route() -> dict[str, Any]:
            routed = await registry_thread(registry, task, agent)
            return routed.model_dump(mode="json")

        return RunResult.model_validate(await DBOS.run_step_async({"name": "router"}, route))
    loop.model = StepModel(loop.model)
    result = await loop.arun(task, run_id=run_id)
    await _learn(registry, result)
    return result


async def _learn(registry: Registry, result: RunResult) -> None:
    """The tools that served the run learn its task as evidence, as ``run_task`` does in
    one process (the router's step learns inside ``Registry.run``). A step of its own,
    so a run resumed after it does not store the evidence twice."""

    async def learn() -> int:
        return await asyncio.to_thread(registry.learn_from_run, result)

    await DBOS.run_step_async({"name": "learn"}, learn)


async def registry_thread(registry: Registry, task: str, agent: str | None) -> RunResult:
    return await asyncio.to_thread(registry.run, task, agent=agent)
