"""``store.record_calls``: many call records and their counters in one transaction."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tooldb import Registry, StoreError

from .ooda_support import tool_spec


def row(registry: Registry, name: str, ok: bool, ms: float, at: float, **extra: Any) -> dict:
    tool = registry.get(name)
    values = {
        "tenant": registry.tenant, "tool_id": tool.id, "tool_name": name, "tool_version": 1,
        "run_id": None, "session_id": "import", "arguments": {"q": "x'; DROP TABLE calls; --"},
        "success": ok, "error_kind": None if ok else "execution",
        "error": None if ok else "bad\ttab\nnewline \\ backslash", "output_size": 3,
        "output_preview": "a\tb", "duration_ms": ms, "started_at": at,
    }  # fmt: skip
    return {**values, **extra}


def test_rows_and_counters_land_together(registry: Registry) -> None:
    registry.add(tool_spec("a"), tool_spec("b"))
    now = time.time()
    rows = [
        row(registry, "a", True, 10.0, now - 3),
        row(registry, "a", False, 30.0, now - 2),
        row(registry, "b", True, 5.0, now - 1),
        row(registry, "b", False, 1.0, now, error_kind="arguments"),  # logged, not counted
    ]
    assert registry.store.record_calls(rows) == 4
    assert registry.store.record_calls([]) == 0
    a, b = registry.get("a").stats, registry.get("b").stats
    assert (a.usage_count, a.success_count, a.total_duration_ms) == (2, 1, 40.0)
    assert a.last_used == pytest.approx(now - 2)
    assert (b.usage_count, b.success_count) == (1, 1)
    logged = registry.calls(limit=10)
    assert len(logged) == 4
    failed = next(c for c in logged if c.tool_name == "a" and not c.success)
    assert failed.error == "bad\ttab\nnewline \\ backslash" and failed.output_preview == "a\tb"
    assert failed.arguments == {"q": "x'; DROP TABLE calls; --"}


def test_a_bad_row_leaves_nothing_behind(registry: Registry) -> None:
    registry.add(tool_spec("a"))
    now = time.time()
    good = row(registry, "a", True, 1.0, now)
    broken = row(registry, "a", True, 1.0, now, tool_name=None)  # NOT NULL
    with pytest.raises(StoreError):
        registry.store.record_calls([good, broken])
    assert registry.store.count_calls(registry.tenant) == 0
    assert registry.get("a").stats.usage_count == 0
    registry.store.record_calls([good])  # the connection is usable afterwards
    assert registry.get("a").stats.usage_count == 1
