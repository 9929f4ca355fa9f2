"""The built-in ``analyze_system_state`` tool, called as agents call it (both stores)."""

from __future__ import annotations

import time

import pytest

from tooldb import Registry, ToolKind, UsageError
from tooldb.tools.diagnostics import analyze_system_state

from .ooda_support import HOUR, log_calls, pattern, tool_spec


def test_builtins_register_as_ordinary_diagnostics_tools(registry: Registry) -> None:
    outcomes = registry.add_builtin_tools()
    assert [(o.record.name, o.status) for o in outcomes] == [
        ("analyze_system_state", "created"),
        ("explain_inference", "created"),
    ]
    tool = registry.get("analyze_system_state")
    assert tool.spec.category == "diagnostics" and tool.spec.kind is ToolKind.PYTHON
    assert set(tool.spec.parameters["properties"]) == {"hours", "top"}
    assert [o.status for o in registry.add_builtin_tools()] == ["unchanged", "unchanged"]


def test_analyze_system_state_reports_the_registry_running_it(registry: Registry) -> None:
    registry.add_builtin_tools()
    registry.add(tool_spec("fast"), tool_spec("slow"), tool_spec("off"))
    registry.disable("off")
    other = registry.for_tenant("other")
    other.add(tool_spec("fast"))
    now = time.time()
    log_calls(registry, "fast", pattern(10, 9), start=now - 3 * HOUR, end=now - 2 * HOUR,
              durations=[5.0] * 10)  # fmt: skip
    log_calls(registry, "fast", [False, False], start=now - 2 * HOUR, end=now - HOUR,
              error_kind="arguments")  # fmt: skip
    log_calls(registry, "slow", pattern(4, 2), start=now - HOUR, end=now - 60,
              durations=[500.0] * 4)  # fmt: skip
    log_calls(registry, "slow", [False] * 5, start=now - 30 * HOUR, end=now - 29 * HOUR)
    log_calls(other, "fast", [False] * 7, start=now - HOUR, end=now - 60)

    result = registry.call("analyze_system_state", {"hours": 24, "top": 5})
    assert result.success, result.error
    state = result.data
    assert state["tenant"] == registry.tenant and state["hours"] == 24
    assert state["tools"]["total"] == 5 and state["tools"]["disabled"] == 1
    assert state["tools"]["by_category"]["diagnostics"] == {"enabled": 2, "disabled": 0}
    assert state["tools"]["by_category"]["general"] == {"enabled": 2, "disabled": 1}
    hours = state["calls_per_hour"]
    assert sum(h["calls"] for h in hours) == 16 and sum(h["failures"] for h in hours) == 5
    assert all(state["since"] <= h["hour_start"] < state["until"] for h in hours)
    errors = state["errors"]
    assert (errors["calls"], errors["failures"]) == (16, 5)
    assert errors["by_kind"] == {"arguments": 2, "execution": 3}
    assert [(t["tool"], t["error_rate"]) for t in state["failing_tools"]] == [
        ("slow", 0.5), ("fast", 0.25),
    ]  # fmt: skip
    slowest = state["slowest_tools"]
    assert slowest[0]["tool"] == "slow" and slowest[0]["avg_ms"] == pytest.approx(500.0)
    assert slowest[0]["window_p95_ms"] is None  # no OODA analysis yet
    assert state["store"]["size_bytes"] > 0 and state["store"]["tenant_calls"] == 21
    assert state["ooda"]["last_cycle_id"] is None

    cycle = registry.ooda().cycle_id
    later = registry.call("analyze_system_state", {"top": 1}).data
    assert later["ooda"]["last_cycle_id"] == cycle
    assert len(later["slowest_tools"]) == 1
    assert later["slowest_tools"][0]["window_p95_ms"] == pytest.approx(500.0)


def test_analyze_system_state_in_another_tenant_and_in_parallel(registry: Registry) -> None:
    other = registry.for_tenant("other")
    other.add_builtin_tools()
    other.add(tool_spec("x"))
    log_calls(other, "x", [True] * 3, start=time.time() - HOUR, end=time.time())
    [first, second] = other.call_many(
        [("analyze_system_state", {}), ("analyze_system_state", {"hours": 1})]
    )
    assert first.success and second.success
    # the three logged calls, plus the other analysis when it was recorded first (the
    # two run side by side, and either may finish first)
    assert first.data["tenant"] == "other" and first.data["errors"]["calls"] in (3, 4)
    assert second.data["errors"]["calls"] in (3, 4)
    assert first.data["tools"]["total"] == 3


def test_analyze_system_state_rejects_bad_input_and_direct_use(registry: Registry) -> None:
    registry.add_builtin_tools()
    failed = registry.call("analyze_system_state", {"hours": 0})
    assert not failed.success and "hours must be from 1" in (failed.error or "")
    assert "top must be" in (registry.call("analyze_system_state", {"top": 1000}).error or "")
    with pytest.raises(UsageError, match=r"registry\.call"):
        analyze_system_state()
