"""Tool choice enforced by tooldb, not only sent to the provider (which may ignore it,
and the scripted and local models do): a turn that breaks it runs nothing, and the
model is told why and asked again (a model turn of the run, so ``max_iterations``
still bounds a model that never complies).

- ``none``: tool calls are not run; each gets a result saying the run answers in text.
- ``required``: a text answer is refused; ``required:TOOL`` also refuses calls of any
  other tool (the whole turn: the calls of one turn may depend on each other).
"""

from __future__ import annotations

from ..models.base import Message, ModelTurn, ToolChoice


def refuse_turn(choice: ToolChoice, turn: ModelTurn, offered: list[str]) -> list[Message]:
    """The messages that refuse ``turn`` under ``choice`` (empty: the turn obeys it)."""
    calls = turn.tool_calls
    if choice.mode == "none":
        if not calls:
            return []
        text = "not run: tool choice is 'none' for this turn, no tool may be called; answer in text"
        return [Message.tool_result(call, f"Error: {text}", is_error=True) for call in calls]
    if choice.mode != "required":
        return []
    if not calls:
        if not turn.text.strip():
            return []  # an empty turn: the loop's own nudge and limit handle it
        names = ", ".join(offered)
        wanted = f"call {choice.name!r}" if choice.name else f"call one of the tools ({names})"
        return [Message.user(f"A tool call is required on this turn, not a text answer: {wanted}.")]
    if choice.name is None:
        return []
    others = sorted({call.name for call in calls if call.name != choice.name})
    if not others:
        return []
    text = (
        f"not run: this turn must call {choice.name!r} (tool choice required:{choice.name}), "
        f"not {', '.join(repr(name) for name in others)}; call {choice.name!r}"
    )
    return [Message.tool_result(call, f"Error: {text}", is_error=True) for call in calls]
