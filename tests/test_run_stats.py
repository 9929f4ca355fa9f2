"""`tooldb stats --runs` (issue 28.7): per UTC day and agent, how many runs a limit
stopped, on both stores; other tenants' runs and sub-runs are not counted."""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

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


def stored_run(registry: Registry, started_at: float, **row: Any) -> None:
    """A top-level run row as the agent loop and router write them."""
    registry.store.create_run(
        {
            "id": uuid.uuid4().hex, "tenant": registry.tenant, "parent_run_id": None,
            "agent": None, "mode": "llm", "model": None, "task": "t", "metadata": {},
            "status": RunStatus.SUCCESS.value, "started_at": started_at, "owner": None,
            "lease_expires_at": None, **row,
        }
    )  # fmt: skip


def test_every_outcome_is_counted_per_agent_newest_day_first(registry: Registry) -> None:
    """The five statuses each counted; runs of one agent in two modes add up; a run with
    no agent is the router's or ``(none)``; the default window is seven UTC days."""
    today = int(time.time() // 86400) * 86400.0 + 60
    day = 86400.0
    for status in ("partial", "partial", "error", "interrupted", "running", "success"):
        stored_run(registry, today, agent="a", status=status)
    stored_run(registry, today, agent="a", mode="router", status="partial")
    stored_run(registry, today, mode="router", status="error")
    stored_run(registry, today, mode="llm", status="interrupted")
    stored_run(registry, today - 6 * day, agent="b", status="running")
    stored_run(registry, today - 6 * day, agent="a", status="success")
    stored_run(registry, today - 7 * day, agent="a", status="partial")  # out of the window
    zero = {"partial": 0, "error": 0, "interrupted": 0, "running": 0}

    def row(at: float, agent: str, runs: int, **counts: int) -> dict[str, Any]:
        shown = datetime.fromtimestamp(at, UTC).date().isoformat()
        partial = counts.get("partial", 0)
        return {"day": shown, "agent": agent, "runs": runs, **zero, **counts,
                "limit_share": partial / runs}  # fmt: skip

    assert registry.run_stats() == [
        row(today, "(none)", 1, interrupted=1),
        row(today, "(router)", 1, error=1),
        row(today, "a", 7, partial=3, error=1, interrupted=1, running=1),
        row(today - 6 * day, "a", 1),
        row(today - 6 * day, "b", 1, running=1),
    ]
    assert len(registry.run_stats(days=8)) == 6


def test_the_day_is_the_utc_day_whatever_the_local_zone(registry: Registry) -> None:
    """Near midnight UTC the local date (here five hours behind) is the day before."""
    just_after_midnight = int(time.time() // 86400) * 86400.0 + 60
    stored_run(registry, just_after_midnight, agent="a")
    utc_day = datetime.fromtimestamp(just_after_midnight, UTC).date().isoformat()
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "EST+5"
    time.tzset()
    try:
        assert [row["day"] for row in registry.run_stats(days=1)] == [utc_day]
    finally:
        if zone is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = zone
        time.tzset()


def test_a_sweep_marks_this_tenants_expired_runs_interrupted(registry: Registry) -> None:
    """A run whose lease expired (its process died) counts as interrupted once swept; a
    live run and another tenant's expired one are left running."""
    now = time.time()
    other = registry.for_tenant("other")
    ids = {}
    for name, reg, lease in (("dead", registry, now - 60), ("alive", registry, now + 600),
                             ("theirs", other, now - 60)):  # fmt: skip
        ids[name] = uuid.uuid4().hex
        reg.store.create_run(
            {"id": ids[name], "tenant": reg.tenant, "parent_run_id": None, "agent": "a",
             "mode": "llm", "model": None, "task": "t", "metadata": {}, "started_at": now,
             "status": RunStatus.RUNNING.value, "owner": "gone", "lease_expires_at": lease}
        )  # fmt: skip
    assert registry.sweep_runs() == [ids["dead"]]
    (row,) = registry.run_stats(days=1)
    assert (row["runs"], row["interrupted"], row["running"]) == (2, 1, 1)
    assert other.store.get_run(other.tenant, ids["theirs"]).status is RunStatus.RUNNING  # type: ignore[union-attr]


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
