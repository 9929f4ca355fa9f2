"""`tooldb stats --runs` (issue 28.7): per UTC day and agent, how many runs a limit
stopped, on both stores; other tenants' runs and sub-runs are not counted."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

import tests.sample_tools as st
from tooldb import Registry, UsageError
from tooldb.agents import AgentLoop, Limits
from tooldb.cli import app
from tooldb.models import ModelTurn, ScriptedModel, call
from tooldb.types import RunStatus


def limited_run(reg: Registry, agent: str | None) -> None:
    turn = ModelTurn(text="working", tool_calls=[call("add", {"a": 1, "b": 2})])
    loop = AgentLoop(reg, ScriptedModel([turn], repeat_last=True), tools=["add"],
                     limits=Limits(max_iterations=1), agent=agent)  # fmt: skip
    assert loop.run("add forever").status is RunStatus.PARTIAL


def finished_run(reg: Registry, agent: str | None) -> None:
    loop = AgentLoop(reg, ScriptedModel([[call("add", {"a": 1, "b": 2})], "3"]),
                     tools=["add"], agent=agent)  # fmt: skip
    assert loop.run("add once").status is RunStatus.SUCCESS


def test_runs_a_limit_stopped_per_day_and_agent(registry: Registry, store_url: str) -> None:
    registry.add_function(st.add)
    for _ in range(3):
        finished_run(registry, "adder")
    limited_run(registry, "adder")
    limited_run(registry, "looper")
    other = registry.for_tenant("other")
    other.add_function(st.add)
    limited_run(other, "adder")  # another tenant's: not counted
    assert registry.run("add 1 and 2").mode == "router"

    rows = registry.run_stats(days=1)
    today = datetime.now(UTC).date().isoformat()
    by_agent = {row["agent"]: row for row in rows}
    assert set(by_agent) == {"adder", "looper", "(router)"}
    assert {row["day"] for row in rows} == {today}
    assert by_agent["adder"]["runs"] == 4 and by_agent["adder"]["partial"] == 1
    assert by_agent["adder"]["limit_share"] == pytest.approx(0.25)
    assert by_agent["looper"]["runs"] == 1 and by_agent["looper"]["limit_share"] == 1.0

    result = CliRunner().invoke(app, ["--db", store_url, "stats", "--runs", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"] == rows
    result = CliRunner().invoke(app, ["--db", store_url, "stats", "--runs"])
    assert result.exit_code == 0 and "looper" in result.stdout and "100%" in result.stdout


def test_days_are_utc_days_and_the_window_is_checked(registry: Registry) -> None:
    registry.add_function(st.add)
    limited_run(registry, "adder")
    (run,) = registry.store.list_runs(registry.tenant)
    two_days_ago = time.time() - 2 * 86400
    registry.store.engine.dispose()
    with registry.store.engine.begin() as conn:
        from tooldb.stores.schema import runs

        conn.execute(runs.update().where(runs.c.id == run.id).values(started_at=two_days_ago))
    assert registry.run_stats(days=2) == []
    (row,) = registry.run_stats(days=3)
    assert row["day"] == datetime.fromtimestamp(two_days_ago, UTC).date().isoformat()
    with pytest.raises(UsageError, match="days must be at least 1"):
        registry.run_stats(days=0)


def test_a_run_counts_on_the_utc_day_it_started(registry: Registry) -> None:
    """Day numbers at a midnight: a second before and after land on two days."""
    from tests.test_store_run_rows import new_run

    midnight = 20_000 * 86400.0
    store, tenant = registry.store, registry.tenant
    for started in (midnight - 1, midnight + 1, midnight + 2):
        run_id = new_run(store, tenant)
        with store.engine.begin() as conn:
            from tooldb.stores.schema import runs

            conn.execute(runs.update().where(runs.c.id == run_id).values(started_at=started))
    rows = store.run_outcomes(tenant, midnight - 86400)
    assert sorted((r["day"], r["agent"], r["runs"]) for r in rows) == [
        (19_999, "a", 1),
        (20_000, "a", 2),
    ]
    assert [r["runs"] for r in store.run_outcomes(tenant, midnight)] == [2]


def test_outcomes_count_top_level_runs_from_since_by_mode_and_status(registry: Registry) -> None:
    """A run started exactly at ``since`` counts, one a second earlier does not; a
    sub-run does not (its parent's business); one agent's runs of a day split by mode
    and status; another tenant's are not counted."""
    from tests.test_store_run_rows import new_run

    store, tenant = registry.store, registry.tenant
    since = 20_000 * 86400.0 + 3600
    root = new_run(store, tenant, started=since)
    new_run(store, tenant, parent=root, started=since + 1)
    new_run(store, tenant, started=since - 1)
    new_run(store, tenant, mode="router", started=since + 2)
    new_run(store, tenant, status=RunStatus.PARTIAL, started=since + 3)
    new_run(store, "other", started=since + 4)
    rows = store.run_outcomes(tenant, since)
    assert sorted((r["day"], r["agent"], r["mode"], r["status"], r["runs"]) for r in rows) == [
        (20_000, "a", "llm", "partial", 1),
        (20_000, "a", "llm", "running", 1),
        (20_000, "a", "router", "running", 1),
    ]
