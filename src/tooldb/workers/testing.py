"""A model a worker process can build from a string, for tests and benchmarks without a
provider: ``--model python:tooldb.workers.testing:plan_model``. The task carries its
plan as JSON after ``plan:``, e.g. ``plan: {"tool": "tick", "turns": 5, "calls": 2}``:
``turns`` tool-calling turns of ``calls`` calls each to ``tool`` (arguments ``{"turn":
i, "call": j}`` plus the plan's ``arguments``), then an answer (with ``"report": true``
the characters of tool results it read). ``{"answer": "tools"}``
answers at once with the names of the tools offered (how a test sees a worker's
selection)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..decorators import tool
from ..models.base import Message, ToolChoice, ToolSchema
from ..models.test import FunctionModel, TurnLike, call


def _plan(messages: list[Message]) -> dict[str, Any]:
    for message in messages:
        if message.role == "user" and "plan:" in (message.content or ""):
            text = message.content.split("plan:", 1)[1]
            plan = json.loads(text)
            return plan if isinstance(plan, dict) else {}
    return {}


def _decide(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> TurnLike:
    plan = _plan(messages)
    if plan.get("answer") == "tools":
        return "tools: " + ",".join(sorted(tool.name for tool in tools))
    turn = sum(1 for message in messages if message.role == "assistant")
    if turn >= int(plan.get("turns", 1)):
        if plan.get("report"):  # what it was given: a resumed run gives the same
            read = sum(len(message.content or "") for message in messages if message.role == "tool")
            return f"done after {turn} turns, {read} characters read"
        return f"done after {turn} turns"
    extra = plan.get("arguments", {})
    return [
        call(plan["tool"], {"turn": turn, "call": index, **extra}, id=f"t{turn}c{index}")
        for index in range(int(plan.get("calls", 1)))
    ]


def plan_model() -> FunctionModel:
    return FunctionModel(_decide, id="python:plan")


@tool(category="testing")
def tick(turn: int = 0, call: int = 0) -> str:
    """A CPU-light tool: echoes its turn and call."""
    return f"tick {turn}.{call}"


@tool(category="testing")
def nap(turn: int = 0, call: int = 0, ms: int = 100) -> str:
    """A tool that waits ``ms`` milliseconds (an API call, say)."""
    time.sleep(ms / 1000)
    return f"nap {turn}.{call}"
