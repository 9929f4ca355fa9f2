"""Execution: run a bound call with its kind's executor and shape a ToolResult.

Nothing a tool does escapes as an exception: a raise becomes a failed result
with the error text, a timeout a failed result saying so. Only the caller's
own mistakes (unknown tool, bad arguments) are raised, and those before this
stage.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from pydantic_core import to_jsonable_python

from .errors import ExecutionError, ToolTimeout
from .executors import Executor, Rendered
from .types import BoundCall, ErrorKind, Returns, ToolResult


class Outcome(NamedTuple):
    """A result plus why it failed (None on success), for the recorder."""

    result: ToolResult
    error_kind: ErrorKind | None
    started_at: float


def execute(executor: Executor, call: BoundCall, timeout_s: float | None) -> Outcome:
    started_at = time.time()
    start = time.perf_counter()
    try:
        executor.prepare(call.tool)
        start = time.perf_counter()
        value = executor.run(call.tool, call.arguments, timeout_s)
    except Exception as exc:
        return _failed(exc, start, started_at)
    return _succeeded(value, call.tool.spec.returns, start, started_at)


async def aexecute(
    executor: Executor,
    call: BoundCall,
    timeout_s: float | None,
    on_cancel: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """``execute`` from a running loop. When the awaiting task is cancelled, the
    cancellation propagates (asyncio requires it) after ``on_cancel`` has been given
    a failed outcome of kind CANCELLED, so the call can still be recorded."""
    started_at = time.time()
    start = time.perf_counter()
    try:
        executor.prepare(call.tool)
        start = time.perf_counter()
        value = await executor.arun(call.tool, call.arguments, timeout_s)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel(cancelled(call, start, started_at))
        raise
    except Exception as exc:
        return _failed(exc, start, started_at)
    return _succeeded(value, call.tool.spec.returns, start, started_at)


def cancelled(call: BoundCall, start: float, started_at: float) -> Outcome:
    duration_ms = (time.perf_counter() - start) * 1000
    text = f"call of tool {call.tool.name!r} was cancelled by the caller after {duration_ms:.0f} ms"
    return Outcome(ToolResult.failure(text, duration_ms), ErrorKind.CANCELLED, started_at)


def _succeeded(value: Any, returns: Returns, start: float, started_at: float) -> Outcome:
    duration_ms = (time.perf_counter() - start) * 1000
    try:
        output, data = render(value, returns)
    except Exception as exc:  # a value that cannot be shown is the tool's failure
        return _failed(ExecutionError(f"result cannot be rendered: {exc}"), start, started_at)
    result = ToolResult(success=True, output=output, data=data, duration_ms=duration_ms)
    return Outcome(result, None, started_at)


def _failed(exc: Exception, start: float, started_at: float) -> Outcome:
    duration_ms = (time.perf_counter() - start) * 1000
    if isinstance(exc, ToolTimeout):
        kind, text = ErrorKind.TIMEOUT, str(exc)
    elif isinstance(exc, ExecutionError):
        kind, text = ErrorKind.EXECUTION, str(exc)
    else:
        kind, text = ErrorKind.EXECUTION, f"{type(exc).__name__}: {exc}"
    result = ToolResult.failure(text, duration_ms)
    # an error that carries structured data (an agent tool's status) keeps it
    result.data = to_jsonable_python(getattr(exc, "data", None), fallback=repr)
    return Outcome(result, kind, started_at)


_SCALAR_TEXT = frozenset({Returns.SCALAR, Returns.TEXT})


def render(value: Any, returns: Returns) -> tuple[str, Any]:
    """(output for a model, structured data) for a tool's return value."""
    kind = type(value)
    if kind is str:  # the usual results first: nothing to convert
        return value, value
    if kind is int and returns in _SCALAR_TEXT:
        return str(value), value
    if isinstance(value, Rendered):
        return value.output, to_jsonable_python(value.data, fallback=repr)
    data = to_jsonable_python(value, fallback=repr)
    if value is None:
        return "", None
    if isinstance(value, str):
        return value, data
    if returns in _SCALAR_TEXT and not isinstance(data, dict | list):
        return (json.dumps(data) if isinstance(data, bool) else str(data)), data
    return json.dumps(data, ensure_ascii=False, separators=(",", ": ")), data
