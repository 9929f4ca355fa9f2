"""A submitted run as a DBOS workflow whose model turns are steps and whose tool calls
are kept with their records.

The agent loop runs unchanged (agents/loop.py); two seams make it durable: its model is
wrapped so each turn is a DBOS step (``StepModel``), and its ``call_tool`` keeps each
call's full result in ``run_steps``, written in the transaction of the call's record
(``durable_call``). A worker that dies mid-run leaves the workflow ``PENDING``; another
worker recovers it (worker.py) and DBOS re-executes the workflow function, which replays
the loop: every turn whose output was checkpointed returns that output without asking
the model again, and every call that completed returns its kept result (the full
ToolResult the model was given) without running again, so the loop reaches the point
where the dead worker stopped and goes on from there.

A call is not a DBOS step of its own: its record is written anyway, and a step would
add a checkpoint read and insert to it (two of the ~65 transactions of a 5-turn run,
per call). A turn's checkpoint carries a token naming the execution that made it; the
calls of a turn this execution made are new (nothing to look for), while a call of a
turn an earlier execution made may have completed or been in flight when that
execution's worker died: its kept result is looked for (then reused), and without one
a tool whose metadata says ``idempotent: false`` is not run again blindly: the run ends
``interrupted`` with ``requires_review``. Idempotent tools are run again. A call's key
names its turn (the checkpointed token), its tool, its arguments and its rank among
the turn's identical calls: the same on every execution.

The finished run's evidence is marked per tool in ``run_steps`` in the transaction
that writes it, so a run resumed after it does not learn twice (no step either).

The run's row and messages are rewritten by a replay (the replayed loop writes them
again); the records of calls are not, since replayed calls do not run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from dbos import DBOS

from ..agents.run import task_loop
from ..errors import ArgumentError, ToolDBError
from ..models.base import Message, Model, ModelTurn, ToolChoice, ToolSchema
from ..stores.call_sql import json_text
from ..stores.schema import run_messages, runs
from ..types import AgentSpec, RunResult, RunStatus, ToolResult
from . import state
from .engine import WORKFLOW_NAME

if TYPE_CHECKING:
    from ..registry import Registry


class CallInterrupted(BaseException):
    """A call of a non-idempotent tool was in flight when its worker died: the run ends
    ``interrupted`` rather than run it again (BaseException: it ends the run, it is not
    a tool error the model is told about)."""


@dataclass
class Turn:
    """The model turn whose calls the current task makes: its checkpointed token, and
    whether an earlier execution made it (its calls may have run already)."""

    token: str
    earlier: bool
    seen: collections.Counter[str] = field(default_factory=collections.Counter)

    def key(self, name: str, arguments: dict[str, Any]) -> str:
        """The call's key in ``run_steps``: the same on every execution of the run (the
        turn is replayed, so are its calls and their order among identical ones)."""
        text = json.dumps(arguments, sort_keys=True, default=repr)
        digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        base = f"call:{self.token}:{name}:{digest}"
        rank = self.seen[base]
        self.seen[base] += 1
        return f"{base}:{rank}"


#: Set by each turn, read by its calls (asyncio tasks copy the context they start in:
#: the calls start after their turn, and share its ``Turn``).
_TURN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("tooldb_turn", default=None)


class StepModel:
    """A model whose every turn is a DBOS step: a resumed run is not asked again. The
    step's output carries a token saying which execution made it: a turn that an
    earlier execution made tells its calls they may have run."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.id = inner.id

    async def complete(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> ModelTurn:
        nonce = uuid.uuid4().hex

        async def turn() -> dict[str, Any]:
            made = await self.inner.complete(messages, tools, tool_choice)
            return {"turn": made.model_dump(mode="json"), "nonce": nonce}

        data = await DBOS.run_step_async({"name": "model_turn"}, turn)
        _TURN.set(Turn(data["nonce"], earlier=data["nonce"] != nonce))
        return ModelTurn.model_validate(data["turn"])


def durable_call(registry: Registry) -> Any:
    """The loop's ``call_tool`` for a run of ``registry``'s tenant (see the module)."""

    async def call_tool(name: str, arguments: dict[str, Any], run_id: str) -> ToolResult:
        turn = _TURN.get()
        if turn is None:  # the loop asks its model before any call
            raise ToolDBError(f"call of {name!r} outside a model turn in run {run_id}")
        return await run_call(registry, name, arguments, run_id, turn.key(name, arguments),
                              earlier=turn.earlier)  # fmt: skip

    return call_tool


async def run_call(
    registry: Registry,
    name: str,
    arguments: dict[str, Any],
    run_id: str,
    key: str,
    *,
    earlier: bool,
) -> ToolResult:
    """One call of a submitted run under its key: reused if an earlier execution kept
    it, interrupted if it may have been in flight and its tool is not idempotent, else
    run (and kept with its record). Raises as ``Registry.acall`` does."""
    if earlier:  # the call may have run when a worker died
        kept = registry.store.run_step(registry.tenant, run_id, key)
        if kept is not None:
            return _reused(*kept)
        if not _idempotent(registry, name):
            raise CallInterrupted(name)
    try:
        return await registry.acall(name, arguments, run_id=run_id, step=key)
    except ArgumentError:
        raise  # recorded, and kept with its record
    except ToolDBError as exc:  # not recorded (unknown or disabled tool, store failure)
        failed = json_text({"error": str(exc)})  # what the model is told, on replay too
        with contextlib.suppress(ToolDBError):
            registry.store.put_run_step(registry.tenant, run_id, key, failed)
        raise


def _reused(call_id: int | None, text: str | None) -> ToolResult:
    """A kept call as the loop got it the first time (or the error it raised)."""
    kept = json.loads(text or "{}")
    if "result" not in kept:
        raise ToolDBError(str(kept.get("error", "the call failed")))
    result = ToolResult.model_validate(kept["result"])
    if kept.get("error_kind") == "arguments":
        raise ArgumentError(result.error or result.output)
    result.call_id = call_id
    return result


def _idempotent(registry: Registry, name: str) -> bool:
    try:
        tool = registry.get(name)
    except ToolDBError:
        return True  # gone: running it again fails cleanly
    return tool.spec.metadata.get("idempotent", True) is not False


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
    one process (the router's step learns inside ``Registry.run``): once per tool, marked
    in the evidence's transaction, so a run resumed after it does not learn twice."""
    await asyncio.to_thread(registry.learn_from_run, result, once=True)


async def registry_thread(registry: Registry, task: str, agent: str | None) -> RunResult:
    return await asyncio.to_thread(registry.run, task, agent=agent)
