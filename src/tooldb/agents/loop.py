"""The LLM tool-calling loop: model turn → tool calls (in parallel) → results → repeat.

It never raises for what a model or a tool does. A tool error, an argument error,
an unknown tool or arguments that are not JSON go back to the model as a tool
result with the error text; a limit (iterations, tool calls, wall clock) or a
model failure ends the run with what it gathered, flagged for review. Every run
is persisted as it goes (agents/run_log.py) and every call is recorded with the
run's id, so the run can be replayed and explained.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..background_loop import run_sync
from ..context import enter_call, leave_call
from ..errors import ArgumentError, ModelError, ToolDBError
from ..models.base import Message, Model, ModelTurn, ToolCall, ToolChoice
from ..recording import HeldRecords
from ..types import LoopContext, RunResult, RunStatus, SkillSpec, ToolRecord, ToolResult, ToolUse
from . import builtins
from .access import access_problem
from .choice import refuse_turn
from .limits import Limits
from .protocol import on_needs_retry
from .run_log import RunLog, storable_use
from .toolbox import Builtin, Toolbox
from .tracing import Tracer, tracer_for
from .turn import (
    Resumed,
    TurnContext,
    TurnRows,
    needs_retry,
    parse_arguments,
    tool_message,
    unknown_tool,
)

if TYPE_CHECKING:
    from ..registry import Registry

#: What runs a tool call of a run in place of ``Registry.acall``: (name, arguments, run id).
CallTool = Callable[[str, dict[str, Any], str], Awaitable[ToolResult]]
MAIN_THREAD = threading.main_thread()
EMPTY_TURN_NUDGE = "Your last reply was empty. Answer the task, or call one of the tools."
MAX_EMPTY_TURNS = 2
#: A tool whose last call in a run took less than this (ms) does not make the run
#: commit the records it holds before calling it again (recording.py's HeldRecords).
QUICK_MS = 1.0


class AgentLoop:
    """Runs tasks with a model and the registry's tools.

    ``tools`` pins the tools offered (by name). ``skills`` start the run with only
    their descriptions and a ``load_skill`` tool (progressive disclosure). With
    neither, the loop offers the ``select_k`` tools selection finds for the task
    plus ``search_tools`` to find more (``search_tools=True`` offers it anyway).
    ``subagents`` offers the ``subagent`` tool. ``tool_choice`` applies to the first
    turn (``required`` then relaxes to ``auto`` so the model can answer).
    ``builtins`` adds loop-implemented tools. ``call_tool`` replaces the registry's
    ``acall`` for the run's tool calls (``tooldb.workers`` keeps each for a resumed run);
    its records are then committed one by one, never held.
    """

    def __init__(
        self,
        registry: Registry,
        model: Model,
        *,
        instructions: str = "",
        tools: Sequence[str] | None = None,
        limits: Limits | None = None,
        tool_choice: str | ToolChoice | None = None,
        select_k: int = 8,
        agent: str | None = None,
        skills: Sequence[str] = (),
        search_tools: bool = False,
        subagents: bool = False,
        builtins: Sequence[Builtin] = (),
        tracer: Tracer | None = None,
        retry_caps: dict[str, int] | None = None,
        call_tool: CallTool | None = None,
    ) -> None:
        self.registry = registry
        self.model = model
        self.instructions = instructions
        self.tools = list(tools) if tools is not None else None
        self.limits = limits or Limits.from_settings(registry.settings)
        self.tool_choice = ToolChoice.parse(tool_choice)
        self.select_k = select_k
        self.agent = agent
        self.skills = list(skills)
        self.search_tools = search_tools
        self.subagents = subagents
        self.extra_builtins = list(builtins)
        self.tracer = tracer or tracer_for(registry.settings)
        self.retry_caps = dict(retry_caps or {})  # per needs_retry target (protocol.py)
        self.call_tool = call_tool

    def run(self, task: str, *, parent: LoopContext | None = None) -> RunResult:
        """Run ``task`` to an answer, a limit or a failure; never raises for either."""
        return run_sync(_Run(self, task, parent, owns_loop=True).execute())

    async def arun(
        self, task: str, *, parent: LoopContext | None = None, run_id: str | None = None
    ) -> RunResult:
        """``run`` from a running loop; ``run_id`` names the run (default: a new uuid)."""
        return await _Run(self, task, parent, run_id=run_id).execute()


class _Run:
    """The state of one run (a fresh one per ``arun``)."""

    def __init__(
        self,
        loop: AgentLoop,
        task: str,
        parent: LoopContext | None,
        *,
        owns_loop: bool = False,
        run_id: str | None = None,
    ) -> None:
        if not isinstance(task, str) or not task.strip():
            from ..errors import UsageError

            raise UsageError("the task must be a non-empty string")
        self.loop = loop
        self.registry = loop.registry
        self.task = task
        self.limits = loop.limits
        self.run_id = run_id or uuid.uuid4().hex
        self.parent = parent
        # A top-level run on a loop of its own (``run()``) has nothing else to schedule
        # while its only call of a turn runs, so a blocking tool may run on the loop's
        # thread: no thread hop, and on the main thread its deadline is SIGALRM, which
        # interrupts it as reliably as in a worker.
        self.owns_loop = owns_loop and parent is None
        self.tracer = loop.tracer.for_run()
        self.history: list[ToolUse] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.iteration = 0
        self.calls_made = 0
        self.argument_errors: Counter[str] = Counter()
        self.target_retries: Counter[str] = Counter()  # re-runs per needs_retry target
        self.retries: list[dict[str, Any]] = []  # the retry chain (protocol.py)
        self.flagged: str | None = None  # a retry cap reached: the run ends for review
        self.choice_met = False  # a turn obeyed ``required`` (it then relaxes to auto)
        self.state: dict[str, Any] = parent.state if parent is not None else {}
        self.toolbox = Toolbox(self.registry)
        self.skills_loaded: list[str] = []
        self.available_skills = _available_skills(self.registry, loop.skills)
        if loop.tools is not None:  # the caller's mistake: raise before a run exists
            missing = self.toolbox.missing(loop.tools)
            if missing:
                from ..errors import NotFound

                raise NotFound(f"tools not found or disabled: {', '.join(missing)}")
        self.last_text = ""
        # Records of calls that ran without the run waiting, committed together when it
        # is about to wait (recording.py's HeldRecords); uses whose call id comes then.
        recorder = self.registry.recorder
        self.held = (
            HeldRecords(recorder, self.registry.settings.agent_held_calls)
            if recorder.enabled and loop.call_tool is None
            else None
        )
        self._unnumbered: list[tuple[ToolResult, ToolUse]] = []
        self.quick_tools: set[str] = set()
        self.started = time.perf_counter()
        self.deadline = self.started + self.limits.timeout_s
        self.log = RunLog(
            self.registry.store,
            self.registry.tenant,
            self.run_id,
            task=task,
            mode="llm",
            agent=loop.agent,
            model=loop.model.id,
            parent_run_id=parent.run_id if parent else None,
            metadata={"limits": self.limits.as_json(), "tool_choice": loop.tool_choice.mode},
            lease_s=self.registry.settings.agent_run_lease_s,
            settings=self.registry.settings,
        )

    # -- the loop ----------------------------------------------------------
    async def execute(self) -> RunResult:
        with self.tracer.run_span(self.run_id, self.loop.agent, self.loop.model.id) as span:
            try:
                result = await self._loop()
            except asyncio.CancelledError:
                self._finish(self._partial("the run was cancelled by its caller"))
                raise
            except Exception as exc:  # a bug or a store failure: still end the run row
                result = self._result(RunStatus.ERROR, error=f"{type(exc).__name__}: {exc}")
                result.requires_review = True
                result.review_reason = "the run failed inside tooldb"
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: the process goes
                self._interrupted(type(exc).__name__)
                raise
            self._finish(result)
            span.set_result(result)
            return result

    async def _loop(self) -> RunResult:
        messages = self._opening()
        self._append(0, messages)
        schemas = self.toolbox.schemas()
        empty_turns = 0
        while True:
            if self.iteration >= self.limits.max_iterations:
                return self._partial(
                    f"reached the limit of {self.limits.max_iterations} iterations"
                )
            remaining = self.deadline - time.perf_counter()
            if remaining <= 0:
                return self._partial(f"reached the time limit of {self.limits.timeout_s:g} s")
            choice = self._choice()
            try:
                turn = await self._model_turn(messages, choice)
            except TimeoutError:
                return self._partial(f"reached the time limit of {self.limits.timeout_s:g} s")
            except ModelError as exc:
                return self._failed(f"model {self.loop.model.id} failed: {exc}")
            except Exception as exc:
                return self._failed(
                    f"model {self.loop.model.id} failed: {type(exc).__name__}: {exc}"
                )
            usage = turn.usage
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            assistant = turn.message()
            messages.append(assistant)
            if turn.text.strip():
                self.last_text = turn.text
            refused = refuse_turn(choice, turn, self.toolbox.names())
            if refused:  # the turn broke the tool choice: nothing runs, the model is told
                messages.extend(refused)
                self._append(self.iteration, [assistant, *refused])
                self.iteration += 1
                continue
            self.choice_met = True
            if not turn.tool_calls:
                if turn.text.strip():
                    self._append(self.iteration, [assistant])
                    self.iteration += 1
                    return self._result(RunStatus.SUCCESS, output=turn.text)
                empty_turns += 1
                nudge = Message.user(EMPTY_TURN_NUDGE)
                messages.append(nudge)
                self._append(self.iteration, [assistant, nudge])
                self.iteration += 1
                if empty_turns >= MAX_EMPTY_TURNS:
                    return self._partial(f"the model returned {empty_turns} empty turns")
                continue
            empty_turns = 0
            results, over_budget, persisted = await self._calls(turn.tool_calls, assistant)
            messages.extend(results)
            if not persisted:
                self._append(self.iteration, [assistant, *results])
            self.iteration += 1
            if over_budget:
                return self._partial(
                    f"reached the limit of {self.limits.max_tool_calls} tool calls"
                )
            if time.perf_counter() >= self.deadline:
                return self._partial(f"reached the time limit of {self.limits.timeout_s:g} s")
            if self.toolbox.schemas() is not schemas:
                schemas = self.toolbox.schemas()

    def _opening(self) -> list[Message]:
        loop = self.loop
        for builtin in loop.extra_builtins:
            self.toolbox.add_builtin(builtin)
        system = [loop.instructions] if loop.instructions else []
        if self.available_skills:
            self.toolbox.add_builtin(builtins.load_skill(self, self.available_skills))
            system.append(builtins.skill_index(self, list(loop.skills), self.available_skills))
        search = loop.search_tools
        if loop.tools is not None:
            self.toolbox.add_tools(loop.tools)
        elif not loop.skills and loop.select_k > 0:
            selection = self.registry.select(
                self.task, loop.select_k, run_id=self.run_id, hold=self.held
            )
            self.toolbox.add_tools(selection.names)
            search = True
        if search:
            self.toolbox.add_builtin(builtins.search_tools(self))
        if loop.subagents and self.parent is None:
            self.toolbox.add_builtin(builtins.subagent(self))
        messages = []
        if system:
            messages.append(Message.system("\n\n".join(system)))
        messages.append(Message.user(self.task))
        return messages

    def _choice(self) -> ToolChoice:
        choice = self.loop.tool_choice
        if choice.mode == "required" and self.choice_met:
            return ToolChoice("auto")
        return choice

    async def _model_turn(self, messages: list[Message], choice: ToolChoice) -> ModelTurn:
        """The model's turn, under the run's time limit. A model that answers without
        suspending (scripted and function models, a cached reply) cannot be interrupted
        by asyncio anyway, so the limit's timer is armed only once the turn suspends:
        no timer handle and context copy per turn for those."""
        tools = self.toolbox.schemas()  # also with "none": providers need them for history
        with self.tracer.model_span(self.loop.model.id, self.iteration) as span:
            pending = self.loop.model.complete(messages, tools, choice)
            steps = pending.__await__() if hasattr(pending, "__await__") else None
            if steps is None:
                turn = await pending  # not awaitable: the TypeError the model's bug deserves
            else:
                try:
                    first = steps.send(None)
                except StopIteration as done:
                    turn = done.value
                else:
                    self.commit_held()  # the model makes us wait: nothing stays uncommitted
                    remaining = self.deadline - time.perf_counter()
                    async with asyncio.timeout(remaining):  # no extra task, unlike wait_for
                        turn = await Resumed(steps, first)
            span.set_usage(turn)
            return turn

    # -- tool calls --------------------------------------------------------
    async def _calls(
        self, calls: list[ToolCall], assistant: Message
    ) -> tuple[list[Message], bool, bool]:
        """Run one turn's calls concurrently: the tool messages in call order, whether the
        limit of tool calls was reached, and whether the turn's messages (``assistant``
        and the tool messages) are persisted already: a lone call's record carries them
        in its transaction (``TurnRows``), else the caller appends them."""
        budget = self.limits.max_tool_calls - self.calls_made
        over_budget = len(calls) > budget
        context = TurnContext(self)
        pending = []
        outcomes: list[ToolResult | None] = []
        parsed = [parse_arguments(call) for call in calls]
        lone = len(calls) == 1 and budget > 0
        turn_rows = TurnRows(self, assistant, calls[0]) if lone else None
        if not lone or not self.runs_inline():
            self.commit_held()  # calls that run beside each other, or in other threads
        for index, call in enumerate(calls):
            if index >= budget:
                outcomes.append(
                    ToolResult.failure(
                        f"not run: this run's limit of {self.limits.max_tool_calls} tool calls "
                        "is reached"
                    )
                )
                continue
            self.calls_made += 1
            outcomes.append(None)
            pending.append((index, self._one(call, parsed[index], context, turn_rows)))
        if len(pending) == 1:  # no task for a lone call
            done = [await pending[0][1]]
        else:
            done = await asyncio.gather(*(coroutine for _, coroutine in pending))
        for (index, _), result in zip(pending, done, strict=True):
            outcomes[index] = result
        out: list[Message] = []
        for call, (arguments, problem), outcome in zip(calls, parsed, outcomes, strict=True):
            assert outcome is not None
            self._remember(call, arguments if problem is None else call.arguments, outcome)
            written = turn_rows.written(outcome) if turn_rows is not None else None
            out.append(written or tool_message(call, outcome))
        return out, over_budget, turn_rows is not None and turn_rows.message is not None

    async def _one(
        self,
        call: ToolCall,
        parsed: tuple[dict[str, Any], str | None],
        context: TurnContext,
        turn_rows: TurnRows | None = None,
    ) -> ToolResult:
        """One call; ``turn_rows`` for a turn's lone call, which may run inline."""
        with self.tracer.tool_span(call.name, call.id) as span:
            arguments, problem = parsed
            if problem is not None:
                result = ToolResult.failure(problem)
            else:
                inline = turn_rows is not None and self.runs_inline()
                result = await self._dispatch(
                    call.name, arguments, context, inline=inline, turn_rows=turn_rows
                )
            span.set_result(result)
        return result

    def _remember(self, call: ToolCall, arguments: Any, result: ToolResult) -> None:
        use = ToolUse(
            tool=call.name,
            arguments=arguments,
            success=result.success,
            output=result.output[:2000],
            error=result.error,
            call_id=result.call_id,
            iteration=self.iteration,
            duration_ms=result.duration_ms,
        )
        self.history.append(use)
        if result.call_id is None and self.held is not None and len(self.held):
            self._unnumbered.append((result, use))  # held: numbered at the commit
        if result.success and result.duration_ms < QUICK_MS:
            self.quick_tools.add(call.name)
        else:
            self.quick_tools.discard(call.name)

    def _append(self, iteration: int, messages: list[Message]) -> None:
        """Persist messages of the run: held with its records, else written now."""
        if self.held is not None:
            self.held.hold_messages(self.log.rows(iteration, messages))
        else:
            self.log.add(iteration, messages)

    def runs_inline(self) -> bool:
        """Whether a turn's lone call may run on this thread (see ``owns_loop``)."""
        return self.owns_loop and threading.current_thread() is MAIN_THREAD

    def commit_held(self) -> None:
        """Commit the records held back (and give their uses the call ids)."""
        if self.held is not None and len(self.held):
            self.held.commit()
        if self._unnumbered:  # also after a commit ``hold`` made when the group was full
            for result, use in self._unnumbered:
                use.call_id = result.call_id
            self._unnumbered.clear()

    def before_run(self, tool: ToolRecord, waits: bool) -> None:
        """Before an inline call's tool runs: what is held stays held only if the tool
        does not wait and has been quick in this run (its last call under QUICK_MS)."""
        if waits or tool.name not in self.quick_tools:
            self.commit_held()

    async def _dispatch(
        self,
        name: str,
        arguments: dict[str, Any],
        context: TurnContext,
        *,
        inline: bool = False,
        turn_rows: TurnRows | None = None,
    ) -> ToolResult:
        builtin = self.toolbox.builtins.get(name)
        if builtin is not None:
            self.commit_held()  # a builtin may wait (a sub-agent's whole run)
            try:
                return await builtin.run(arguments, context())
            except ToolDBError as exc:
                return ToolResult.failure(f"{name}: {exc}")
        if name not in self.toolbox.offered:
            return ToolResult.failure(unknown_tool(name, self.toolbox.names()))
        retries = self.limits.max_retries_per_tool
        if self.argument_errors[name] > retries:
            return ToolResult.failure(
                f"not run: {name!r} was called with invalid arguments (or answered "
                f"needs_retry) {self.argument_errors[name]} times; its retry budget "
                f"({retries}) is used up"
            )
        level = self.toolbox.access.get(name)
        if level is not None:
            problem = access_problem(self.toolbox.records[name], level)
            if problem is not None:
                return ToolResult.failure(problem)
        scope = enter_call(context, level)
        try:
            if self.loop.call_tool is not None:
                result = await self.loop.call_tool(name, arguments, self.run_id)
            else:
                result = await self.registry.acall(
                    name, arguments, run_id=self.run_id, inline=inline, record_also=turn_rows
                )
        except ArgumentError as exc:
            self.argument_errors[name] += 1
            left = retries - self.argument_errors[name] + 1
            retry_word = "retry" if left == 1 else "retries"
            hint = (
                f" (fix the arguments and call again: {left} {retry_word} left)"
                if left > 0
                else " (no retries left for this tool)"
            )
            return ToolResult.failure(f"{exc}{hint}")
        except ToolDBError as exc:
            return ToolResult.failure(str(exc))
        except Exception as exc:
            return ToolResult.failure(f"{type(exc).__name__}: {exc}")
        finally:
            leave_call(scope)
        if not result.success and needs_retry(result):
            return await on_needs_retry(self, name, arguments, result, context)
        return result

    # -- outcomes ----------------------------------------------------------
    def _result(
        self, status: RunStatus, *, output: str = "", error: str | None = None
    ) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            status=status,
            output=output,
            error=error,
            task=self.task,
            agent=self.loop.agent,
            mode="llm",
            model=self.loop.model.id,
            parent_run_id=self.parent.run_id if self.parent else None,
            iterations=self.iteration,
            tool_calls=list(self.history),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            duration_ms=(time.perf_counter() - self.started) * 1000,
        )

    def _partial(self, reason: str) -> RunResult:
        result = self._result(RunStatus.PARTIAL, output=self._gathered())
        result.requires_review = True
        result.review_reason = reason
        return result

    def _failed(self, error: str) -> RunResult:
        result = self._result(RunStatus.ERROR, output=self._gathered(), error=error)
        result.requires_review = True
        result.review_reason = error
        return result

    def _interrupted(self, why: str) -> None:
        """End the run row as ``interrupted`` on the way out of a process that stops."""
        result = self._result(RunStatus.INTERRUPTED, output=self._gathered())
        result.requires_review = True
        result.review_reason = f"the run was interrupted ({why})"
        with contextlib.suppress(Exception):  # the store is away: the lease will expire
            self._finish(result)

    def _gathered(self) -> str:
        """The best answer so far: the model's last words, else the last good tool output."""
        if self.last_text:
            return self.last_text
        for use in reversed(self.history):
            if use.success and use.output:
                return use.output
        return ""

    def _finish(self, result: RunResult) -> None:
        try:
            self.commit_held()
        except ToolDBError as exc:  # the store failed: the run says so, it does not crash
            result.status = RunStatus.ERROR
            result.error = f"the run's records could not be written: {exc}"
            result.requires_review = True
            result.review_reason = result.error
        result.data = {
            "tool_calls": [storable_use(use) for use in result.tool_calls],
            "skills_loaded": list(self.skills_loaded),
            "state": self.state,  # shared by the run tree: persisted as each run ends
            "retries": self.retries,
        }
        if self.flagged and result.status is RunStatus.SUCCESS:
            result.status, result.requires_review = RunStatus.PARTIAL, True
            result.review_reason = self.flagged
        self.log.finish(result)


def _available_skills(registry: Registry, names: Sequence[str]) -> dict[str, SkillSpec]:
    """The agent's skills, the skills they depend on and their sub-skills (by ``parent``),
    active ones only; an unknown skill name is the caller's mistake (NotFound)."""
    if not names:
        return {}
    every = {skill.name: skill for skill in registry.skills() if skill.active}
    missing = [name for name in names if name not in every]
    if missing:
        from ..errors import NotFound

        raise NotFound(f"skills not found or inactive: {', '.join(missing)}")
    out: dict[str, SkillSpec] = {}
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in out or name not in every:
            continue
        out[name] = every[name]
        stack.extend(every[name].depends_on)
        stack.extend(child for child, skill in every.items() if skill.parent == name)
    return out
