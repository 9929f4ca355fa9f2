"""The no-LLM decision loop: select → extract arguments → bind → execute → record.

It is what ``tooldb run`` does without a model, so the main job works offline. The
best candidate runs. If its arguments cannot be extracted and bound, the run fails
with binding's error naming what is missing (``attempts`` > 1 tries the next
candidates instead: off by default, because a lower-ranked tool that happens to
bind is more often the wrong tool than the right one). The decision records the
tool actually run. With a model configured, arguments are
extracted by the model (a forced call of that one tool) and by the heuristics of
extract.py if the model fails.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING

from ..background_loop import run_sync
from ..errors import ArgumentError, ModelError, NotFound, ToolDisabled, UsageError
from ..models.base import Message, Model, ToolCall, ToolChoice, ToolSchema
from ..types import RunResult, RunStatus, ToolUse
from .extract import extract_arguments
from .run_log import RunLog

if TYPE_CHECKING:
    from ..registry import Registry

EXTRACTION_PROMPT = (
    "Extract the arguments for the tool from the user's request. Call the tool exactly once; "
    "leave out optional arguments the request does not mention."
)


class Router:
    """Picks one tool per task and runs it; ``k`` candidates, ``attempts`` tried at most."""

    def __init__(
        self,
        registry: Registry,
        *,
        model: Model | None = None,
        k: int = 5,
        attempts: int = 1,
        category: str | None = None,
        names: list[str] | None = None,
    ) -> None:
        if k < 1 or attempts < 1:
            raise UsageError("router k and attempts must be at least 1")
        self.registry = registry
        self.model = model
        self.k = k
        self.attempts = attempts
        self.category = category
        self.names = names

    def run(self, task: str, *, agent: str | None = None) -> RunResult:
        return run_sync(self.arun(task, agent=agent))

    async def arun(
        self, task: str, *, agent: str | None = None, parent_run_id: str | None = None
    ) -> RunResult:
        if not isinstance(task, str) or not task.strip():
            raise UsageError("the task must be a non-empty string")
        started = time.perf_counter()
        run_id = uuid.uuid4().hex
        log = RunLog(
            self.registry.store,
            self.registry.tenant,
            run_id,
            task=task,
            mode="router",
            agent=agent,
            model=self.model.id if self.model else None,
            parent_run_id=parent_run_id,
            metadata={"k": self.k, "attempts": self.attempts},
            lease_s=self.registry.settings.agent_run_lease_s,
        )
        log.add(0, [Message.user(task)])
        history: list[ToolUse] = []
        skipped: list[str] = []
        selection = self.registry.select(
            task, self.k, category=self.category, names=self.names, run_id=run_id
        )
        result = RunResult(
            run_id=run_id, status=RunStatus.ERROR, task=task, agent=agent, mode="router",
            model=self.model.id if self.model else None, parent_run_id=parent_run_id,
        )  # fmt: skip
        for iteration, candidate in enumerate(selection.candidates[: self.attempts]):
            arguments, how = await self._arguments(task, candidate.name)
            call = ToolCall(id=f"route_{iteration}", name=candidate.name, arguments=arguments)
            try:
                outcome = await self.registry.acall(candidate.name, arguments, run_id=run_id)
            except (ArgumentError, NotFound, ToolDisabled) as exc:
                skipped.append(f"{candidate.name}: {exc}")
                history.append(
                    ToolUse(
                        tool=candidate.name,
                        arguments=arguments,
                        success=False,
                        error=str(exc),
                        iteration=iteration,
                    )
                )
                _log_step(log, iteration, how, call, f"Error: {exc}", failed=True)
                continue
            history.append(ToolUse(
                tool=candidate.name, arguments=arguments, success=outcome.success,
                output=outcome.output[:2000], error=outcome.error, call_id=outcome.call_id,
                iteration=iteration, duration_ms=outcome.duration_ms,
            ))  # fmt: skip
            content = outcome.output if outcome.success else f"Error: {outcome.error}"
            _log_step(log, iteration, how, call, content, failed=not outcome.success)
            if selection.decision_id is not None:
                self.registry.store.set_decision_choice(selection.decision_id, candidate.name)
            result.status = RunStatus.SUCCESS if outcome.success else RunStatus.ERROR
            result.output = outcome.output
            result.data = outcome.data
            result.error = outcome.error
            break
        else:
            result.requires_review = True
            if not selection.candidates:
                result.error = "no enabled tool matches the task"
            else:
                result.error = "no candidate tool could take arguments from the task: " + "; ".join(
                    skipped
                )
            result.review_reason = result.error
        result.iterations = len(history)
        result.tool_calls = history
        result.duration_ms = (time.perf_counter() - started) * 1000
        log.finish(result)
        return result

    async def _arguments(self, task: str, name: str) -> tuple[dict[str, object], str]:
        """Arguments for tool ``name`` and how they were found (the run log says)."""
        tool = self.registry.get(name)
        if self.model is not None:
            schema = ToolSchema(
                name=name, description=tool.spec.description, parameters=tool.spec.parameters
            )
            try:
                turn = await self.model.complete(
                    [Message.system(EXTRACTION_PROMPT), Message.user(task)],
                    [schema],
                    ToolChoice("required", name),
                )
                calls = [c for c in turn.tool_calls if c.name == name]
                if calls:
                    value = json.loads(calls[0].arguments or "{}")
                    if isinstance(value, dict):
                        return value, f"arguments extracted by {self.model.id}"
            except (ModelError, ValueError):
                pass  # the model could not extract them: the heuristics below still can
        extraction = extract_arguments(task, tool.spec.parameters)
        notes = ", ".join(f"{k}: {v}" for k, v in extraction.notes.items()) or "none found"
        return extraction.arguments, f"router chose {name}; arguments from the task ({notes})"


def _log_step(
    log: RunLog, iteration: int, how: str, call: ToolCall, content: str, *, failed: bool
) -> None:
    """The router's step in the run log, shaped like a model's turn and its tool result."""
    log.add(
        iteration,
        [
            Message(role="assistant", content=how, tool_calls=[call]),
            Message.tool_result(call, content, is_error=failed),
        ],
    )
