"""Parallel execution: many independent calls at once, results in request order.

Each call goes through ``Registry.acall``: async tools run on the loop, blocking
work (sync Python tools, database drivers) in the shared thread pool
(executors/threads.py), subprocess kinds as concurrent processes. Two
semaphores bound a batch: one for the whole batch, one per tool name; a call
waits for its tool's slot before taking a global one, so a tool at its own limit
does not hold global slots that other tools could use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ToolDBError, UsageError
from ..types import ToolResult

if TYPE_CHECKING:
    from . import Registry


async def run_many(
    registry: Registry,
    requests: Sequence[tuple[str, Any]],
    *,
    run_id: str | None = None,
    timeout_s: float | None = None,
    max_parallel: int | None = None,
    max_parallel_per_tool: int | None = None,
) -> list[ToolResult]:
    """See ``Registry.acall_many``: never raises for one call's failure, only for a
    malformed batch or limits (UsageError) and for cancellation."""
    calls = _checked(requests)
    overall = asyncio.Semaphore(
        _limit("max_parallel", max_parallel, registry.settings.max_parallel_calls)
    )
    per_tool_limit = _limit(
        "max_parallel_per_tool", max_parallel_per_tool, registry.settings.max_parallel_per_tool
    )
    per_tool: dict[str, asyncio.Semaphore] = {}

    async def one(name: str, arguments: Any) -> ToolResult:
        tool_slot = per_tool.setdefault(name, asyncio.Semaphore(per_tool_limit))
        async with tool_slot, overall:
            try:
                return await registry.acall(name, arguments, run_id=run_id, timeout_s=timeout_s)
            except ToolDBError as exc:  # unknown tool, bad arguments...: this slot only
                return ToolResult.failure(str(exc))
            except Exception as exc:
                return ToolResult.failure(f"{type(exc).__name__}: {exc}")

    return list(await asyncio.gather(*(one(name, arguments) for name, arguments in calls)))


def _checked(requests: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    if isinstance(requests, str | bytes) or not isinstance(requests, Sequence):
        raise UsageError("call_many takes a list of (tool name, arguments) pairs")
    calls: list[tuple[str, Any]] = []
    for index, request in enumerate(requests):
        if not isinstance(request, tuple | list) or len(request) != 2:
            raise UsageError(
                f"call_many request #{index} must be a (tool name, arguments) pair, "
                f"got {request!r:.80}"
            )
        name, arguments = request
        if not isinstance(name, str):
            raise UsageError(
                f"call_many request #{index}: tool name must be a string, got {type(name).__name__}"
            )
        calls.append((name, arguments))
    return calls


def _limit(what: str, given: int | None, default: int) -> int:
    value = default if given is None else given
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive integer, got {value!r}")
    return value
