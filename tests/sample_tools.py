"""Tools used by the tests: importable by path, so subprocesses can run them too."""

from __future__ import annotations

import asyncio
import time

from tooldb import tool
from tooldb.types import LoopContext


@tool(category="math")
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def echo_message(message: str) -> str:
    """Return the message (a healthy twin of ``fail``)."""
    return message


@tool
def noop() -> None:
    """Do nothing (for overhead measurements)."""


@tool
def fail(message: str = "boom") -> None:
    """Always raise."""
    raise RuntimeError(message)


@tool
def swallow_everything(seconds: float = 5.0) -> str:
    """Spin in pure Python, catching every Exception (must still be stopped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sum(range(1000))
        except Exception:
            continue
    return "finished"


@tool
def sleep_sync(seconds: float) -> str:
    """Block in time.sleep."""
    time.sleep(seconds)
    return "slept"


@tool
async def sleep_async(seconds: float) -> str:
    """Await asyncio.sleep."""
    await asyncio.sleep(seconds)
    return "slept"


@tool
def whoami(note: str, ctx: LoopContext | None = None) -> dict[str, object]:
    """Report the run this call belongs to (a tool that asks for the LoopContext)."""
    if ctx is None:
        return {"note": note, "run": None}
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    return {
        "note": note,
        "run": ctx.run_id,
        "iteration": ctx.iteration,
        "history": [use.tool for use in ctx.history],
        "is_subagent": ctx.is_subagent,
        "parent": ctx.parent_run_id,
    }
