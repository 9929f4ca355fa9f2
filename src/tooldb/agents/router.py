"""The no-LLM decision loop: select → plan calls (extract arguments) → bind → execute → record.

It is what ``tooldb run`` does without a model, so the main job works offline. The
offered tools are ranked by selection; ``extraction.plan_calls`` decides what to do:
one call, several calls (of one tool or of several, run together with ``call_many``),
or an honest decline that names the tool it would use and the required arguments the
task does not give. Arguments the caller supplies (``arguments=``, ``tooldb run
--args``) fill or override the extracted ones; ``ask`` (the CLI's prompt on a
terminal) is asked for the missing ones before declining. Every argument carries the
reason it was chosen: in ``RunResult.plan`` and in the run log. ``attempts`` > 1
tries the next candidates when the chosen one lacks arguments (off by default: a
lower-ranked tool that happens to bind is more often wrong than right). With a model
configured, the model extracts the arguments of the chosen tool (a forced call) and
the heuristics are the fallback.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..background_loop import run_sync
from ..binding.runtime import visible_schema
from ..errors import ArgumentError, ModelError, NotFound, ToolDisabled, UsageError
from ..models.base import Message, Model, ToolCall, ToolChoice, ToolSchema
from ..types import RunResult, RunStatus, Selection, ToolUse
from .extraction import Offered, Options, Plan, PlannedCall, plan_calls
from .run_log import RunLog

if TYPE_CHECKING:
    from ..registry import Registry

EXTRACTION_PROMPT = (
    "Extract the arguments for the tool from the user's request. Call the tool exactly once; "
    "leave out optional arguments the request does not mention."
)
Ask = Callable[[str, str, dict[str, Any]], Any]
"""``ask(tool, parameter, its schema)`` → a value, or None to leave it missing."""


class Router:
    """Plans the calls a task asks for and runs them; ``k`` candidates are offered."""

    def __init__(
        self,
        registry: Registry,
        *,
        model: Model | None = None,
        k: int = 5,
        attempts: int = 1,
        category: str | None = None,
        names: list[str] | None = None,
        ask: Ask | None = None,
    ) -> None:
        if k < 1 or attempts < 1:
            raise UsageError("router k and attempts must be at least 1")
        self.registry = registry
        self.model = model
        self.k = k
        self.attempts = attempts
        self.category = category
        self.names = names
        self.ask = ask

    def run(
        self, task: str, *, agent: str | None = None, arguments: dict[str, Any] | None = None
    ) -> RunResult:
        return run_sync(self.arun(task, agent=agent, arguments=arguments))

    def plan(
        self,
        task: str,
        *,
        arguments: dict[str, Any] | None = None,
        run_id: str | None = None,
        record: bool | None = None,
    ) -> tuple[Plan, Selection]:
        """What the router would do with ``task``, without running anything."""
        if not isinstance(task, str) or not task.strip():
            raise UsageError("the task must be a non-empty string")
        if arguments is not None and not isinstance(arguments, dict):
            raise UsageError("arguments must be a JSON object (a mapping of name to value)")
        selection = self.registry.select(
            task, self.k, category=self.category, names=self.names, run_id=run_id, record=record
        )
        offered = [_offered(self.registry, c.name) for c in selection.candidates]
        # The fit gate guards a choice among the tools selection found; a caller that
        # names exactly one tool (an agent tool that runs its one tool) made the choice.
        options = Options(fit_gate=False) if self.names and len(set(self.names)) == 1 else None
        plan = plan_calls(task, offered, supplied=arguments, options=options)
        for _ in range(self.attempts - 1):
            if not plan.missing or plan.tool is None:
                break
            offered = [tool for tool in offered if tool.name != plan.tool]
            retry = plan_calls(task, offered, supplied=arguments)
            if not retry.declined:
                plan = retry
        plan = self._asked(task, plan, offered, arguments)
        return plan, selection

    def _asked(
        self, task: str, plan: Plan, offered: list[Offered], arguments: dict[str, Any] | None
    ) -> Plan:
        """Ask (a terminal) for the missing required arguments, then plan again."""
        if self.ask is None or not plan.missing or plan.tool is None:
            return plan
        tool = next(t for t in offered if t.name == plan.tool)
        properties = tool.parameters.get("properties") or {}
        supplied = dict(arguments or {})
        for name in plan.missing:
            value = self.ask(tool.name, name, properties.get(name) or {})
            if value is None:
                return plan
            supplied[name] = value
        return plan_calls(task, [tool], supplied={**plan.arguments, **supplied})

    async def arun(
        self,
        task: str,
        *,
        agent: str | None = None,
        parent_run_id: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> RunResult:
        started = time.perf_counter()
        run_id = uuid.uuid4().hex
        plan, selection = self.plan(task, arguments=arguments, run_id=run_id)
        if self.model is not None and (plan.tool is not None or len(plan.calls) == 1):
            plan = await self._model_arguments(task, plan, arguments)
        log = RunLog(
            self.registry.store, self.registry.tenant, run_id, task=task, mode="router",
            agent=agent, model=self.model.id if self.model else None, parent_run_id=parent_run_id,
            metadata={"k": self.k, "attempts": self.attempts},
            lease_s=self.registry.settings.agent_run_lease_s,
            settings=self.registry.settings,
        )  # fmt: skip
        log.add(0, [Message.user(task)])
        result = RunResult(
            run_id=run_id, status=RunStatus.ERROR, task=task, agent=agent, mode="router",
            model=self.model.id if self.model else None, parent_run_id=parent_run_id,
            plan=plan.as_dict(),
        )  # fmt: skip
        if plan.declined:
            result.requires_review = True
            result.error = result.review_reason = plan.declined
            log.add(0, [Message(role="assistant", content=_explain(plan))])
        else:
            await self._execute(plan, selection, result, log)
        result.duration_ms = (time.perf_counter() - started) * 1000
        log.finish(result)
        return result

    async def _execute(
        self, plan: Plan, selection: Selection, result: RunResult, log: RunLog
    ) -> None:
        calls = [
            ToolCall(id=f"route_{i}", name=c.tool, arguments=json.dumps(c.arguments, default=str))
            for i, c in enumerate(plan.calls)
        ]
        log.add(0, [Message(role="assistant", content=_explain(plan), tool_calls=calls)])
        if len(plan.calls) == 1:
            only = plan.calls[0]
            try:
                outcomes = [
                    await self.registry.acall(only.tool, only.arguments, run_id=result.run_id)
                ]
            except (ArgumentError, NotFound, ToolDisabled) as exc:
                result.tool_calls = [ToolUse(tool=only.tool, arguments=only.arguments,
                                             success=False, error=str(exc))]  # fmt: skip
                result.iterations = 1
                result.requires_review = True
                result.error = result.review_reason = f"{only.tool}: {exc}"
                log.add(0, [Message.tool_result(calls[0], f"Error: {exc}", is_error=True)])
                return
        else:
            requests = [(c.tool, c.arguments) for c in plan.calls]
            outcomes = await self.registry.acall_many(requests, run_id=result.run_id)
        for call, planned, outcome in zip(calls, plan.calls, outcomes, strict=True):
            result.tool_calls.append(ToolUse(
                tool=planned.tool, arguments=planned.arguments, success=outcome.success,
                output=outcome.output[:2000], error=outcome.error, call_id=outcome.call_id,
                duration_ms=outcome.duration_ms,
            ))  # fmt: skip
            content = outcome.output if outcome.success else f"Error: {outcome.error}"
            log.add(0, [Message.tool_result(call, content, is_error=not outcome.success)])
        result.iterations = 1
        if selection.decision_id is not None:
            self.registry.store.set_decision_choice(selection.decision_id, plan.calls[0].tool)
        failed = [o for o in outcomes if not o.success]
        result.status = RunStatus.ERROR if failed else RunStatus.SUCCESS
        if len(outcomes) == 1:
            result.output, result.data, result.error = (
                outcomes[0].output,
                outcomes[0].data,
                outcomes[0].error,
            )
        else:
            result.output = "\n".join(
                f"{p.tool}({_args_text(p)}): {o.output if o.success else 'Error: ' + str(o.error)}"
                for p, o in zip(plan.calls, outcomes, strict=True)
            )
            result.data = [o.data for o in outcomes]
            result.error = "; ".join(str(o.error) for o in failed) or None

    async def _model_arguments(
        self, task: str, plan: Plan, supplied: dict[str, Any] | None
    ) -> Plan:
        """With a model: a forced call of the chosen tool extracts its arguments; the
        heuristics' plan stands when the model fails."""
        if self.model is None:
            return plan
        name = plan.tool or plan.calls[0].tool
        tool = self.registry.get(name)
        schema = ToolSchema(name=name, description=tool.spec.description,
                            parameters=visible_schema(tool.spec.parameters))  # fmt: skip
        try:
            turn = await self.model.complete(
                [Message.system(EXTRACTION_PROMPT), Message.user(task)],
                [schema],
                ToolChoice("required", name),
            )
            calls = [c for c in turn.tool_calls if c.name == name]
            value = json.loads(calls[0].arguments or "{}") if calls else None
        except (ModelError, ValueError):
            return plan  # the model could not extract them: the heuristics' plan stands
        if not isinstance(value, dict):
            return plan
        value.update(supplied or {})
        why = {key: f"extracted by {self.model.id}" for key in value}
        return Plan(calls=[PlannedCall(name, value, why)])


def _offered(registry: Registry, name: str) -> Offered:
    spec = registry.get(name).spec
    # The runtime fills its own parameters (binding/runtime.py): nothing to extract.
    parameters = visible_schema(spec.parameters)
    return Offered(name=name, description=spec.description, parameters=parameters)


def _args_text(call: PlannedCall) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())


def _explain(plan: Plan) -> str:
    """The router's reasoning in words, for the run log (``tooldb run show``)."""
    if plan.declined:
        found = "; ".join(f"{k} = {plan.arguments[k]!r} ({plan.why.get(k, '')})"
                          for k in plan.arguments)  # fmt: skip
        return f"declined: {plan.declined}" + (f". Found: {found}" if found else "")
    lines = []
    for call in plan.calls:
        why = "; ".join(f"{k} = {v!r} ({call.why.get(k, '')})" for k, v in call.arguments.items())
        lines.append(f"router chose {call.tool}: {why or 'no arguments'}")
    return "\n".join(lines)
