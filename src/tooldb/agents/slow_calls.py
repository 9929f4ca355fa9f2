"""Slow-call warnings: the calls of a run that took far longer than their tool usually does.

A tool that suddenly takes ten times its usual time is worth knowing about before OODA's
next cycle finds the trend: the run that met it says so in its record. "Usually" is the
p95 of the tool's last successful calls made before the run started (at most
``HISTORY`` of them, read from the call log), so the run's own calls never raise their
own bar; a tool with fewer than ``slow_call_min_history`` such calls is not judged, as
one slow call among three says nothing. Failed calls count as history neither way (a
timeout's duration is its limit, not the tool's speed) but are judged like the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..settings import Settings
from ..stores import Store
from ..types import ToolUse

#: How many of a tool's latest successful calls its expected latency is taken from.
HISTORY = 200


@dataclass(frozen=True)
class SlowCall:
    """One call slower than ``factor`` times its tool's p95 (what the run's record keeps)."""

    tool: str
    call_id: int | None
    iteration: int
    duration_ms: float
    p95_ms: float
    history: int
    factor: float

    def warning(self) -> str:
        ratio = self.duration_ms / self.p95_ms if self.p95_ms > 0 else float("inf")
        return (
            f"slow call: {self.tool} took {self.duration_ms:.0f} ms, {ratio:.1f}x the p95 of "
            f"its last {self.history} successful calls ({self.p95_ms:.1f} ms; warned above "
            f"{self.factor:g}x)"
        )

    def as_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def find_slow_calls(
    store: Store, tenant: str, uses: Sequence[ToolUse], *, before: float, settings: Settings
) -> list[SlowCall]:
    """The calls among ``uses`` slower than ``settings.slow_call_factor`` times the p95 of
    their tool's successful calls started before ``before`` (the run's start)."""
    factor = settings.slow_call_factor
    if factor <= 0 or not uses:
        return []
    names = sorted({use.tool for use in uses})
    history = store.recent_durations(tenant, names, before=before, limit=HISTORY)
    expected = {
        name: (float(np.percentile(durations, 95)), len(durations))
        for name, durations in history.items()
        if durations and len(durations) >= max(1, settings.slow_call_min_history)
    }
    slow: list[SlowCall] = []
    for use in uses:
        known = expected.get(use.tool)
        if known is not None and use.duration_ms > factor * known[0]:
            slow.append(SlowCall(use.tool, use.call_id, use.iteration, use.duration_ms,
                                 known[0], known[1], factor))  # fmt: skip
    return slow
