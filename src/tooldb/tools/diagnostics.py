"""Diagnostics tools (category ``diagnostics``, protected from OODA's disabling by
default): an agent can ask how the registry it runs on is doing."""

from __future__ import annotations

import time
from typing import Any

from ..context import current_registry
from ..decorators import tool
from ..errors import UsageError

MAX_HOURS = 24 * 90
MAX_TOP = 100


@tool(category="diagnostics", returns="json")
def analyze_system_state(hours: int = 24, top: int = 5) -> dict[str, Any]:
    """Registry and call-log health: tools by status, calls per hour, error rates,
    the most failing and the slowest tools, the last OODA cycle and the store's size.

    Args:
        hours: How many hours of the call log to look at, ending now (1 to 2160).
        top: How many tools to list as most failing and slowest (1 to 100).
    """
    if not 1 <= hours <= MAX_HOURS:
        raise UsageError(f"hours must be from 1 to {MAX_HOURS}, got {hours}")
    if not 1 <= top <= MAX_TOP:
        raise UsageError(f"top must be from 1 to {MAX_TOP}, got {top}")
    registry = current_registry()
    until = time.time()
    since = until - hours * 3600.0
    state = registry.store.system_state(registry.tenant, since, until, top=top)
    return {"tenant": registry.tenant, "since": since, "until": until, "hours": hours, **state}


@tool(category="diagnostics", returns="json")
def explain_inference(run_id: str = "", call_id: int = 0) -> dict[str, Any]:
    """Provenance of a result: with ``run_id``, the run's tree of selection decisions,
    calls, results and sub-runs; with ``call_id``, that call walked back to its run,
    task and the selection that chose its tool. Give exactly one of the two.

    Args:
        run_id: An agent run's id (as ``tooldb runs`` or a LoopContext shows it).
        call_id: A recorded call's id (as a tool result's ``call_id`` shows it).
    """
    if bool(run_id) == bool(call_id):
        raise UsageError("give exactly one of run_id and call_id")
    registry = current_registry()
    if run_id:
        return {"trace": registry.trace(run_id).tree}
    return {"explanation": registry.explain(call_id).model_dump(mode="json")}
