"""Models for testing agents without a provider: the way users test their own agents.

``ScriptedModel`` plays a fixed list of turns; ``FunctionModel`` lets a function
decide each turn from the conversation so far (and the tools offered).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from ..errors import ModelError
from .base import Message, ModelTurn, StopReason, ToolCall, ToolChoice, ToolSchema, Usage

TurnLike = ModelTurn | str | ToolCall | list[ToolCall] | dict[str, Any]

_ids = itertools.count(1)


def call(name: str, arguments: Any = None, id: str | None = None) -> ToolCall:
    """A tool call for a script: ``call("add", {"a": 1})`` (an id is made up if omitted)."""
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=arguments)


def as_turn(value: TurnLike, model: str | None = None) -> ModelTurn:
    """Text is an answer; a ToolCall or a list of them is a tool-calling turn. ``model``
    names the model of a turn made here (a ModelTurn given keeps its own)."""
    if isinstance(value, ModelTurn):
        return value
    if isinstance(value, str):
        return ModelTurn(text=value, stop_reason=StopReason.END, model=model)
    if isinstance(value, ToolCall):
        value = [value]
    if isinstance(value, list):
        return ModelTurn(tool_calls=value, stop_reason=StopReason.TOOL_CALLS, model=model)
    if isinstance(value, dict):
        turn = ModelTurn.model_validate(value)
        return turn if turn.model or model is None else turn.model_copy(update={"model": model})
    raise TypeError(f"cannot make a model turn from {type(value).__name__}")


class ScriptedModel:
    """Plays ``turns`` in order; after the last one it raises ModelError (a script that
    ran out is a test bug worth seeing), unless ``repeat_last`` is set.

    ``requests`` keeps what the loop sent on every turn, for assertions.
    """

    def __init__(
        self,
        turns: Sequence[TurnLike],
        *,
        id: str = "test:scripted",
        repeat_last: bool = False,
        usage: Usage | None = None,
    ) -> None:
        self.id = id
        self._turns = [as_turn(turn) for turn in turns]
        self._next = 0
        self.repeat_last = repeat_last
        self.usage = usage or Usage(input_tokens=10, output_tokens=5)
        self.requests: list[tuple[list[Message], list[ToolSchema], ToolChoice]] = []

    async def complete(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> ModelTurn:
        self.requests.append((list(messages), list(tools), tool_choice))
        if self._next >= len(self._turns):
            if self.repeat_last and self._turns:
                return self._stamp(self._turns[-1])
            raise ModelError(f"ScriptedModel has no turn left (it had {len(self._turns)})")
        turn = self._turns[self._next]
        self._next += 1
        return self._stamp(turn)

    def _stamp(self, turn: ModelTurn) -> ModelTurn:
        if turn.model is None or turn.usage == Usage():
            return turn.model_copy(update={"model": turn.model or self.id, "usage": self.usage})
        return turn


#: What a decide function returns when it answers at once (exact types: no ABC check).
_TURN_TYPES = frozenset({str, ToolCall, list, ModelTurn, dict})

Decide = Callable[[list[Message], list[ToolSchema], ToolChoice], TurnLike | Awaitable[TurnLike]]


class FunctionModel:
    """Each turn is ``function(messages, tools, tool_choice)`` (sync or async), returning
    text, a ToolCall, a list of them or a ModelTurn."""

    def __init__(self, function: Decide, *, id: str = "test:function") -> None:
        self.id = id
        self.function = function

    async def complete(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> ModelTurn:
        value = self.function(list(messages), list(tools), tool_choice)
        if type(value) not in _TURN_TYPES and inspect.isawaitable(value):
            value = await value
        turn = as_turn(cast(TurnLike, value), self.id)
        return turn if turn.model else turn.model_copy(update={"model": self.id})
