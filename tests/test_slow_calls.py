"""A run's record warns of a call far slower than its tool's history (issue 28.7): the
p95 of the tool's earlier successful calls times ``slow_call_factor``, judged only with
``slow_call_min_history`` calls of history, never against the run's own calls; shown by
the run's result, ``tooldb runs show`` and its metadata, on both stores."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import Registry, Settings
from tooldb.agents import AgentLoop
from tooldb.cli import app
from tooldb.models import ScriptedModel, call
from tooldb.types import RunStatus


def wait(ms: int) -> str:
    """Wait this many milliseconds, then say so."""
    time.sleep(ms / 1000)
    return f"waited {ms}"


def flaky(ms: int) -> str:
    """Fail after waiting: failures are no history of speed."""
    time.sleep(ms / 1000)
    raise RuntimeError("down")


def open_registry(url: str, **settings: object) -> Registry:
    values: dict[str, object] = {"embedder": "hash", "url": url, "slow_call_min_history": 8}
    return tooldb.open(url, settings=Settings(**{**values, **settings}))  # type: ignore[arg-type]


@pytest.fixture
def slow_registry(store_url: str) -> Iterator[Registry]:
    reg = open_registry(store_url)
    reg.add_function(wait)
    yield reg
    reg.close()


def history(reg: Registry, calls: int, ms: int = 20) -> None:
    for _ in range(calls):
        assert reg.call("wait", {"ms": ms}).success


def run_waits(reg: Registry, *waits: int) -> tooldb.RunResult:
    turns: list[object] = [[call("wait", {"ms": ms})] for ms in waits] + ["done"]
    result = AgentLoop(reg, ScriptedModel(turns), tools=["wait"]).run("wait a little")
    assert result.status is RunStatus.SUCCESS
    return result


def test_a_call_far_slower_than_its_history_is_warned_of(
    slow_registry: Registry, store_url: str
) -> None:
    history(slow_registry, 10)
    result = run_waits(slow_registry, 20, 200)
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("slow call: wait took 2")
    assert "p95 of its last 10 successful calls" in result.warnings[0]
    slow = slow_registry.store.get_run_details(slow_registry.tenant, result.run_id)
    assert slow is not None
    (kept,) = slow["metadata"]["slow_calls"]
    assert kept["tool"] == "wait" and kept["history"] == 10 and kept["factor"] == 3.0
    assert kept["call_id"] == result.tool_calls[1].call_id
    assert kept["duration_ms"] >= 200 and 20 <= kept["p95_ms"] < 200 / 3
    assert slow["metadata"]["limits"]  # what the run started with is kept

    shown = CliRunner().invoke(app, ["--db", store_url, "runs", "show", result.run_id])
    assert shown.exit_code == 0, shown.output
    assert "warning: slow call: wait took" in shown.stdout
    as_json = CliRunner().invoke(app, ["--db", store_url, "runs", "show", result.run_id, "--json"])
    assert json.loads(as_json.stdout)["metadata"]["slow_calls"][0]["tool"] == "wait"


def test_too_little_history_judges_nothing(slow_registry: Registry) -> None:
    history(slow_registry, 7)  # one short of slow_call_min_history
    assert run_waits(slow_registry, 200).warnings == []


def test_the_runs_own_calls_are_not_its_history(slow_registry: Registry) -> None:
    """Eight fast calls inside the run do not make its last call slow: only calls
    made before the run started count."""
    result = run_waits(slow_registry, *([5] * 8), 200)
    assert result.warnings == []
    details = slow_registry.store.get_run_details(slow_registry.tenant, result.run_id)
    assert details is not None and "slow_calls" not in details["metadata"]


def test_failed_calls_are_judged_but_are_no_history(store_url: str) -> None:
    reg = open_registry(store_url)
    reg.add_function(flaky)
    try:
        for _ in range(10):
            assert not reg.call("flaky", {"ms": 1}).success
        turns: list[object] = [[call("flaky", {"ms": 150})], "gave up"]
        result = AgentLoop(reg, ScriptedModel(turns), tools=["flaky"]).run("try")
        assert result.warnings == []  # no successful history: nothing to judge against
    finally:
        reg.close()


def test_factor_zero_turns_the_warning_off(store_url: str) -> None:
    reg = open_registry(store_url, slow_call_factor=0.0)
    reg.add_function(wait)
    try:
        history(reg, 10)
        assert run_waits(reg, 200).warnings == []
    finally:
        reg.close()


def test_the_router_warns_too(slow_registry: Registry) -> None:
    history(slow_registry, 10)
    result = slow_registry.run("wait 300 milliseconds")
    assert result.status is RunStatus.SUCCESS, result.error
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("slow call: wait took 3")


def test_a_negative_factor_is_refused() -> None:
    with pytest.raises(tooldb.UsageError, match="slow_call_factor"):
        Settings(slow_call_factor=-1.0)
