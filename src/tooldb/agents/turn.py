"""The parts of one agent-loop turn: the model's arguments read, what it is told of a
result, the LoopContext its tools may ask for, and the rows the turn writes in its
call's record transaction (see ``loop.py``)."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from pydantic_core import from_json

from ..models.base import Message, ToolCall
from ..stores import RunMessages
from ..types import LoopContext, ToolRecord, ToolResult

if TYPE_CHECKING:
    from .loop import _Run


def tool_message(call: ToolCall, result: ToolResult) -> Message:
    """What the model is told of a call's result."""
    return Message.tool_result(
        call,
        result.output if result.success else f"Error: {result.error}",
        is_error=not result.success,
    )


class TurnRows:
    """A turn's messages (its assistant message, the tool message of its lone call) for
    the transaction of that call's record (``Registry.acall``'s ``record_also``), which
    the run holds with the records of the turns before it until it is about to wait
    (``_Run.commit_held``): the messages never lag behind the record, and turns that
    follow each other without waiting share one commit.

    The registry hands over the result before recording it; a result whose text the
    loop still rewrites (``needs_retry``) is declined and the turn appended as usual.
    ``written(result)`` afterwards: the tool message already persisted, if any."""

    __slots__ = ("_assistant", "_call", "_result", "_run", "held", "message")

    def __init__(self, run: _Run, assistant: Message, call: ToolCall) -> None:
        self._run = run
        self._assistant = assistant
        self._call = call
        self._result: ToolResult | None = None
        self.message: Message | None = None
        self.held = run.held

    def before_run(self, tool: ToolRecord, waits: bool) -> None:
        self._run.before_run(tool, waits)

    def __call__(self, result: ToolResult) -> RunMessages | None:
        if not result.success and needs_retry(result):
            return None
        message = tool_message(self._call, result)
        rows = self._run.log.rows(self._run.iteration, [self._assistant, message])
        self._result, self.message = result, message
        return rows

    def written(self, result: ToolResult) -> Message | None:
        """The tool message for ``result`` if the record's transaction wrote the turn
        (the loop got back the very result, and the registry recorded it)."""
        if self.message is None:
            return None
        if result is not self._result:
            self.message = None  # not recorded (a store failure): the caller appends
            return None
        return self.message


def needs_retry(result: ToolResult) -> bool:
    data = result.data
    return isinstance(data, dict) and data.get("status") == "needs_retry"


class TurnContext:
    """The LoopContext of one turn's calls, built when a tool first asks for it: most
    tools never do, and building it copies the run's history."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self._history_length = len(run.history)
        self._context: LoopContext | None = None

    def __call__(self) -> LoopContext:
        if self._context is None:
            run = self._run
            self._context = LoopContext(
                run_id=run.run_id,
                iteration=run.iteration,
                history=run.history[: self._history_length],
                is_subagent=run.parent is not None,
                parent_run_id=run.parent.run_id if run.parent else None,
                agent=run.loop.agent,
                model=run.loop.model,
            )
            # the run tree's one dict, not a validated copy: tools' writes must be shared
            self._context.state = run.state
        return self._context


def parse_arguments(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    text = call.arguments.strip()
    if not text:
        return {}, None
    try:
        value = from_json(text)  # several times faster than json.loads on a few keys
    except (ValueError, TypeError):  # TypeError: text with a lone surrogate
        value = _NOT_PARSED
    try:  # what it rejects (lone surrogates, raw or escaped): json.loads, and its message
        value = json.loads(text) if value is _NOT_PARSED else value
    except ValueError as exc:
        return {}, (
            f"the arguments for {call.name!r} are not valid JSON ({exc}); send a JSON object "
            "with the tool's parameters"
        )
    if not isinstance(value, dict):
        return {}, (
            f"the arguments for {call.name!r} must be a JSON object, got {type(value).__name__}"
        )
    return value, None


_NOT_PARSED = object()


def unknown_tool(name: str, available: list[str]) -> str:
    shown = ", ".join(available[:30]) + (" ..." if len(available) > 30 else "")
    return f"unknown tool {name!r}: call one of the tools offered ({shown or 'none'})"


class Resumed:
    """Awaits the rest of an awaitable whose first step the caller already took (``steps``
    is its ``__await__`` iterator, ``first`` what that step yielded): what ``await``
    would have done, but with the first step taken outside (see ``_model_turn``)."""

    __slots__ = ("_first", "_steps")

    def __init__(self, steps: Any, first: Any) -> None:
        self._steps = steps
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        steps, pending = self._steps, self._first
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # cancellation (the time limit) goes in too
                try:
                    pending = steps.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = steps.send(sent)
                except StopIteration as done:
                    return done.value
