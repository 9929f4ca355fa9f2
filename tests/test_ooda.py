"""OODA on both stores: analysis figures, findings, the act policy, undo, and selection
reading the refreshed figures."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

import tooldb
from tooldb import NotFound, Registry, Settings, ToolDisabled, UsageError

from .ooda_support import DAY, HOUR, Opener, log_calls, pattern, tool_spec


def kinds(report: Any) -> set[tuple[str, str]]:
    return {(f.kind.value, f.tool) for f in report.findings}


def test_analysis_figures_are_the_logs_and_exclude_rejected_arguments(
    open_registry: Opener,
) -> None:
    registry = open_registry()
    registry.add(tool_spec("fetch"), tool_spec("idle"))
    now = time.time()
    durations = [float(d) for d in np.random.default_rng(3).lognormal(3, 1, 150)]
    outcomes = pattern(150, 120)
    log_calls(registry, "fetch", outcomes, start=now - 6 * DAY, end=now - HOUR, durations=durations)
    log_calls(registry, "fetch", pattern(40, 10), start=now - 13 * DAY, end=now - 8 * DAY)
    log_calls(registry, "fetch", [False] * 30, start=now - 2 * DAY, end=now - DAY,
              error_kind="arguments")  # fmt: skip
    report = registry.ooda(now=now)
    fetch = next(f for f in report.figures if f.tool == "fetch")
    assert (fetch.calls, fetch.successes) == (150, 120)
    assert fetch.success_rate == pytest.approx(0.8)
    assert fetch.avg_ms == pytest.approx(float(np.mean(durations)))
    assert fetch.p50_ms == pytest.approx(float(np.percentile(durations, 50)))
    assert fetch.p95_ms == pytest.approx(float(np.percentile(durations, 95)))
    assert (fetch.previous_calls, fetch.previous_success_rate) == (40, 0.25)
    idle = next(f for f in report.figures if f.tool == "idle")
    assert (idle.calls, idle.success_rate, idle.p95_ms) == (0, None, None)
    assert report.calls_analyzed == 150 and report.cycle_id is not None
    trend = registry.ooda.trend("fetch")
    assert len(trend) == 1 and trend[0]["calls"] == 150
    assert trend[0]["p95_ms"] == pytest.approx(fetch.p95_ms)
    assert trend[0]["cycle_id"] == report.cycle_id
    registry.ooda(now=now + 1)
    assert len(registry.ooda.trend("fetch")) == 2  # one row per tool per analysis
    with pytest.raises(NotFound):
        registry.ooda.trend("nope")


def test_selection_reads_window_figures_at_once_plus_calls_since(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("lookup_weather", "Look up the weather for a city."))
    now = time.time()
    log_calls(registry, "lookup_weather", [False] * 300, start=now - 40 * DAY, end=now - 30 * DAY)
    log_calls(registry, "lookup_weather", [True] * 50, start=now - 5 * DAY, end=now - DAY)

    def candidate() -> Any:
        return registry.select("weather in a city", k=1, record=False).candidates[0]

    before = candidate()
    assert before.calls == 350 and before.success < 0.2  # lifetime counters
    registry.ooda(now=now)
    after = candidate()
    assert after.calls == 50 and after.success > 0.95  # the window, at once
    log_calls(registry, "lookup_weather", [False] * 10, start=now, end=now + 1)
    assert registry.call("lookup_weather").success  # the call path's own recording
    live = candidate()
    assert live.calls == 61
    assert live.success == pytest.approx((51 + 5 * 0.9) / (61 + 5))
    # A dry run changes nothing selection reads.
    registry.ooda(dry_run=True, now=now + 2)
    assert candidate().calls == 61


def test_low_success_slow_and_never_used_follow_their_thresholds(open_registry: Opener) -> None:
    registry = open_registry(ooda_slow_p95_ms=500.0, ooda_never_used_after_s=0.0)
    registry.add(*(tool_spec(n) for n in ("weak", "weak_few", "fine", "slow", "unused")))
    now = time.time()
    span = {"start": now - 5 * DAY, "end": now - HOUR}
    log_calls(registry, "weak", pattern(101, 60), **span)
    log_calls(registry, "weak_few", pattern(100, 10), **span)  # needs more than 100
    log_calls(registry, "fine", pattern(200, 150), **span)
    log_calls(registry, "slow", [True] * 40, durations=[100.0] * 30 + [900.0] * 10, **span)
    report = registry.ooda(dry_run=True, now=now)
    assert kinds(report) == {
        ("low_success", "weak"), ("slow", "slow"), ("never_used", "unused"),
    }  # fmt: skip
    weak = next(f for f in report.findings if f.tool == "weak")
    assert (weak.evidence.calls, weak.evidence.successes) == (101, 60)
    assert weak.evidence.threshold == 0.7 and weak.evidence.min_calls == 100
    assert weak.evidence.window_end == now and weak.evidence.window_start == now - 7 * DAY
    # A tool registered just now is not "never used": by default it gets a window first.
    fresh = open_registry()
    assert ("never_used", "unused") not in kinds(fresh.ooda(dry_run=True, now=now))


def test_degrading_needs_a_significant_test_not_a_raw_difference(open_registry: Opener) -> None:
    registry = open_registry()
    names = ("falling", "wobbly", "slower", "steady")
    registry.add(*(tool_spec(n) for n in names))
    now = time.time()
    before = {"start": now - 13 * DAY, "end": now - 8 * DAY}
    current = {"start": now - 6 * DAY, "end": now - HOUR}
    rng = np.random.default_rng(11)
    log_calls(registry, "falling", pattern(200, 190), **before)
    log_calls(registry, "falling", pattern(200, 150), **current)
    # 90% -> 70% on 10 calls each: a raw 20-point drop, but no evidence.
    log_calls(registry, "wobbly", pattern(10, 9), **before)
    log_calls(registry, "wobbly", pattern(10, 7), **current)
    log_calls(
        registry, "slower", [True] * 100, durations=list(rng.lognormal(4, 0.5, 100)), **before
    )
    log_calls(
        registry, "slower", [True] * 100, durations=list(rng.lognormal(4.7, 0.5, 100)), **current
    )
    for window in (before, current):  # a big healthy tool: no finding, however many calls
        log_calls(registry, "steady", [bool(x) for x in rng.random(2000) < 0.9],
                  durations=list(rng.lognormal(4, 0.5, 2000)), **window)  # fmt: skip
    report = registry.ooda(dry_run=True, now=now)
    assert kinds(report) == {("degrading", "falling"), ("degrading", "slower")}
    falling = next(f for f in report.findings if f.tool == "falling")
    evidence = falling.evidence
    assert evidence.metric == "success" and evidence.test == "fisher_exact_one_sided"
    assert (evidence.previous_calls, evidence.previous_successes) == (200, 190)
    assert evidence.p_adjusted is not None and evidence.p_adjusted < 0.01
    assert evidence.p_value is not None and evidence.p_adjusted >= evidence.p_value
    slower = next(f for f in report.findings if f.tool == "slower").evidence
    assert slower.metric == "latency" and slower.test == "welch_t_log_ms_one_sided"
    assert slower.typical_ms is not None and slower.previous_typical_ms is not None
    assert slower.typical_ms / slower.previous_typical_ms > 1.5


def test_policy_disables_failing_tools_unless_protected(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(
        tool_spec("flaky_api", "Fetch the exchange rate of a currency."),
        tool_spec("rates_api", "Exchange rate of a currency, from a second provider."),
        tool_spec("probe", "Probe a service.", category="diagnostics"),
        tool_spec("borderline"),
    )
    now = time.time()
    span = {"start": now - 5 * DAY, "end": now - HOUR}
    log_calls(registry, "flaky_api", pattern(250, 75), **span)
    log_calls(registry, "rates_api", pattern(50, 48), **span)
    log_calls(registry, "probe", pattern(250, 50), **span)
    log_calls(registry, "borderline", pattern(200, 20), **span)  # not more than 200 calls
    report = registry.ooda(now=now)
    assert [(a.tool, a.action, a.actor, a.policy) for a in report.acts] == [
        ("flaky_api", "disable", "ooda", "disable_failing")
    ]
    assert [h.tool for h in report.held] == ["probe"]
    assert "protected" in report.held[0].reason
    assert not registry.get("flaky_api").enabled
    assert registry.get("probe").enabled and registry.get("borderline").enabled
    with pytest.raises(ToolDisabled):
        registry.call("flaky_api")
    assert "flaky_api" not in registry.select("exchange rate of a currency", k=5).names
    act = registry.ooda.history()[0]
    assert act.id == report.acts[0].id and act.cycle_id == report.cycle_id
    assert act.evidence["calls"] == 250 and act.evidence["successes"] == 75
    assert act.evidence["policy"]["success_below"] == 0.5
    assert "30% of 250 calls" in act.reason
    flaky = next(f for f in report.findings if f.tool == "flaky_api")
    assert [a.tool for a in flaky.alternatives] == ["rates_api"]
    assert flaky.alternatives[0].success_rate == pytest.approx(48 / 50)
    # The next cycle finds the tool disabled: no second act.
    assert registry.ooda(now=now + 1).acts == []


def test_undo_reenables_and_the_tool_is_judged_again_on_new_calls_only(
    open_registry: Opener,
) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    disabled = registry.ooda(now=now).acts[0]
    undo = registry.ooda.undo(disabled.id)  # type: ignore[arg-type]
    assert (undo.action, undo.actor, undo.policy, undo.reverses) == (
        "enable", "person", "undo", disabled.id,
    )  # fmt: skip
    assert registry.get("flaky").enabled
    history = {a.id: a for a in registry.ooda.history()}
    assert history[disabled.id].undone_by == undo.id
    with pytest.raises(UsageError, match="already undone"):
        registry.ooda.undo(disabled.id)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        registry.ooda.undo(999_999)
    with pytest.raises(NotFound):
        registry.for_tenant("other").ooda.undo(disabled.id)  # type: ignore[arg-type]
    later = time.time() + 1
    report = registry.ooda(now=later)
    assert report.acts == [] and registry.get("flaky").enabled
    assert [h.tool for h in report.held] == ["flaky"] and "only 0 calls" in report.held[0].reason
    log_calls(registry, "flaky", pattern(201, 20), start=later + 1, end=later + 100)
    again = registry.ooda(now=later + 200).acts
    assert [(a.tool, a.action) for a in again] == [("flaky", "disable")]
    assert again[0].evidence["calls"] == 201  # only the calls since the undo


def test_a_reenable_by_hand_is_recorded_and_respected(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    disabled = registry.ooda(now=now).acts[0]
    registry.enable("flaky")
    report = registry.ooda(now=time.time() + 1)
    assert [(a.action, a.policy, a.reverses) for a in report.acts] == [
        ("enable", "manual_enable", disabled.id)
    ]
    assert registry.get("flaky").enabled
    assert registry.ooda.history()[1].undone_by == report.acts[0].id


def test_dry_run_changes_nothing(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    report = registry.ooda(dry_run=True, now=now)
    assert report.dry_run and report.cycle_id is None
    assert [(a.id, a.tool, a.action) for a in report.acts] == [(None, "flaky", "disable")]
    assert registry.get("flaky").enabled
    assert registry.ooda.history() == [] and registry.store.list_cycles(registry.tenant) == []
    assert registry.ooda.trend("flaky") == []
    assert registry.ooda.findings(now=now) == report.findings


# -- hostile input -------------------------------------------------------------------


def test_empty_log(open_registry: Opener) -> None:
    registry = open_registry()
    assert registry.ooda().findings == []
    registry.add(tool_spec("a"))
    report = registry.ooda()
    assert report.findings == [] and report.acts == [] and report.calls_analyzed == 0
    assert any("no calls" in note for note in report.notes)


def test_calls_from_the_future_are_left_out_and_reported(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("skewed"))
    now = time.time()
    log_calls(registry, "skewed", [False] * 300, start=now + HOUR, end=now + 2 * HOUR)
    log_calls(registry, "skewed", [True] * 20, start=now - DAY, end=now - HOUR)
    report = registry.ooda(now=now)
    assert report.future_calls == 300 and report.acts == [] and report.findings == []
    assert any("future" in note and "clock skew" in note for note in report.notes)
    figures = next(f for f in report.figures if f.tool == "skewed")
    assert (figures.calls, figures.successes) == (20, 20)
    candidate = registry.select("skewed", k=1, record=False).candidates[0]
    assert candidate.calls == 20  # the skewed calls are not in the window figures


def test_tools_removed_since_are_left_out_and_cannot_be_undone(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("gone"), tool_spec("kept"))
    now = time.time()
    log_calls(registry, "gone", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    act = registry.ooda(now=now).acts[0]
    registry.remove("gone")
    report = registry.ooda(now=now + 1)
    assert report.orphan_calls == 300 and "gone" not in {f.tool for f in report.figures}
    with pytest.raises(NotFound, match="removed since"):
        registry.ooda.undo(act.id)  # type: ignore[arg-type]
    registry.add(tool_spec("gone"))  # a new tool of the same name starts clean
    fresh = next(f for f in registry.ooda(now=now + 2).figures if f.tool == "gone")
    assert fresh.calls == 0 and registry.get("gone").enabled
    with pytest.raises(NotFound, match="removed since"):
        registry.ooda.undo(act.id)  # type: ignore[arg-type]


def test_broken_durations_do_not_break_the_analysis(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("odd"))
    now = time.time()
    log_calls(registry, "odd", [True] * 4, start=now - DAY, end=now - HOUR,
              durations=[-5.0, 0.0, 1e12, 3.0])  # fmt: skip
    figures = next(f for f in registry.ooda(now=now).figures if f.tool == "odd")
    assert figures.calls == 4 and figures.p95_ms is not None


def test_tenants_do_not_see_each_others_calls_or_locks(open_registry: Opener) -> None:
    acme, other = open_registry("acme"), open_registry("other")
    acme.add(tool_spec("shared"))
    other.add(tool_spec("shared"))
    now = time.time()
    log_calls(other, "shared", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    assert acme.ooda(now=now).acts == []
    assert acme.get("shared").enabled
    acme.store.acquire_ooda_lock("acme", "someone-else", 60.0)
    assert [a.tool for a in other.ooda(now=now).acts] == ["shared"]


def test_a_held_lease_makes_another_cycle_report_or_wait(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    store, tenant = registry.store, registry.tenant
    taken, _, _ = store.acquire_ooda_lock(tenant, "host:1:other", 60.0)
    assert taken
    with pytest.raises(tooldb.StoreError, match=r"another OODA cycle .* host:1:other"):
        registry.ooda()
    assert registry.ooda(dry_run=True).dry_run  # a dry run needs no lease
    import threading

    threading.Timer(0.3, store.release_ooda_lock, (tenant, "host:1:other")).start()
    assert registry.ooda(wait_s=10).cycle_id is not None
    # A lease whose holder died expires.
    store.acquire_ooda_lock(tenant, "host:2:crashed", 0.05)
    time.sleep(0.1)
    assert registry.ooda().cycle_id is not None
    with pytest.raises(UsageError):
        registry.ooda(wait_s=-1)


def test_concurrent_cycles_act_once(store_url: str) -> None:
    import threading

    settings = Settings(embedder="hash", url=store_url)
    setup = tooldb.open(store_url, settings=settings)
    setup.add(tool_spec("flaky"))
    now = time.time()
    log_calls(setup, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    registries = [tooldb.open(store_url, settings=settings) for _ in range(4)]
    barrier = threading.Barrier(len(registries))
    outcomes: list[Any] = []

    def cycle(registry: Registry) -> None:
        barrier.wait()
        try:
            outcomes.append(registry.ooda(wait_s=30))
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            outcomes.append(exc)

    threads = [threading.Thread(target=cycle, args=(r,)) for r in registries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for registry in registries:
        registry.close()
    assert all(not isinstance(o, Exception) for o in outcomes), outcomes
    assert sum(len(o.acts) for o in outcomes) == 1
    assert [a.action for a in setup.ooda.history()] == ["disable"]
    assert len(setup.store.list_cycles(setup.tenant)) == 4
    setup.close()


def test_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="ooda_alpha"):
        Settings(ooda_alpha=2.0)
    with pytest.raises(UsageError, match="ooda_window_s"):
        Settings(ooda_window_s=0)
    with pytest.raises(UsageError, match="ooda_disable_min_calls"):
        Settings(ooda_disable_min_calls=-1)
    assert Settings(ooda_protected_categories=["a", "b"]).ooda_protected_categories == ("a", "b")
    monkeypatch.setenv("TOOLDB_OODA_PROTECTED_CATEGORIES", "diagnostics, billing")
    monkeypatch.setenv("TOOLDB_OODA_WINDOW", "3600")
    loaded = Settings.load()
    assert loaded.ooda_protected_categories == ("diagnostics", "billing")
    assert loaded.ooda_window_s == 3600.0


def test_sqlite_without_math_functions_gets_ln_from_python() -> None:
    import math
    import sqlite3

    from tooldb.stores.sqlite import _ensure_ln

    connection = sqlite3.connect(":memory:")

    class NoMathCursor:  # a build without SQLITE_ENABLE_MATH_FUNCTIONS answers like this
        def execute(self, sql: str) -> None:
            raise sqlite3.OperationalError("no such function: ln")

    _ensure_ln(connection, NoMathCursor())
    assert connection.execute("SELECT ln(1.0 + 9.0)").fetchone()[0] == pytest.approx(math.log(10.0))
    _ensure_ln(connection, connection.cursor())  # present: left alone


def test_degrading_reports_the_holm_adjusted_p_not_the_raw_one(open_registry: Opener) -> None:
    """190/200 -> 174/200 is p 0.004 alone: significant at alpha 0.01. Beside five steady
    tools (180/200 in both windows) the family has 12 tests and Holm lifts it to 0.048:
    no finding."""
    registry = open_registry()
    steady = [f"steady_{i}" for i in range(5)]
    registry.add(tool_spec("dipping"), *(tool_spec(n) for n in steady))
    now = time.time()
    before = {"start": now - 13 * DAY, "end": now - 8 * DAY}
    current = {"start": now - 6 * DAY, "end": now - HOUR}
    log_calls(registry, "dipping", pattern(200, 190), **before)
    log_calls(registry, "dipping", pattern(200, 174), **current)
    for name in steady:
        for window in (before, current):
            log_calls(registry, name, pattern(200, 180), **window)
    report = registry.ooda(dry_run=True, now=now)
    assert [f for f in report.findings if f.kind.value == "degrading"] == []
    # alone, the same tool is reported, with the raw p and the adjusted one
    alone = open_registry("alone")
    alone.add(tool_spec("dipping"))
    log_calls(alone, "dipping", pattern(200, 190), **before)
    log_calls(alone, "dipping", pattern(200, 174), **current)
    [finding] = [f for f in alone.ooda(dry_run=True, now=now).findings if f.tool == "dipping"]
    assert finding.kind.value == "degrading" and finding.evidence.metric == "success"
    assert finding.evidence.p_value == pytest.approx(0.004, abs=0.001)
    assert finding.evidence.p_adjusted == pytest.approx(2 * finding.evidence.p_value)


def test_the_disable_policy_boundary_is_strictly_below_the_rate(open_registry: Opener) -> None:
    """Disable below 50% over more than 200 calls: exactly 50% stays, one success fewer
    goes; 200 calls at 10% stay (not more than 200), 201 calls at 10% go."""
    registry = open_registry()
    names = ("at_rate", "just_below", "at_min_calls", "over_min_calls")
    registry.add(*(tool_spec(n) for n in names))
    now = time.time()
    span = {"start": now - 5 * DAY, "end": now - HOUR}
    log_calls(registry, "at_rate", pattern(250, 125), **span)
    log_calls(registry, "just_below", pattern(250, 124), **span)
    log_calls(registry, "at_min_calls", pattern(200, 20), **span)
    log_calls(registry, "over_min_calls", pattern(201, 20), **span)
    report = registry.ooda(now=now)
    assert sorted(a.tool for a in report.acts) == ["just_below", "over_min_calls"]
    assert registry.get("at_rate").enabled and registry.get("at_min_calls").enabled
    assert not registry.get("just_below").enabled and not registry.get("over_min_calls").enabled


def test_run_acts_by_default_findings_only_read_and_history_trend_and_undo_say_what(
    open_registry: Opener,
) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"), tool_spec("fine"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    log_calls(registry, "fine", pattern(40, 40), start=now - 5 * DAY, end=now - DAY)
    findings = registry.ooda.findings(now=now)
    assert ("low_success", "flaky") in {(f.kind.value, f.tool) for f in findings}
    assert registry.get("flaky").enabled and registry.ooda.history() == []  # read only
    report = registry.ooda.run(now=now)  # not a dry run unless asked
    assert not report.dry_run and report.cycle_id is not None
    assert [a.tool for a in report.acts] == ["flaky"] and not registry.get("flaky").enabled
    [act] = registry.ooda.history()
    assert registry.ooda.history(limit=0) == []
    with pytest.raises(UsageError, match="limit must be 0 or more"):
        registry.ooda.history(limit=-1)
    [figures] = registry.ooda.trend("flaky")
    assert (figures["calls"], figures["successes"]) == (300, 30)
    assert figures["success_rate"] == pytest.approx(0.1)
    for later in (1, 2):
        registry.ooda(now=now + later)
    assert len(registry.ooda.trend("fine")) == 3 and len(registry.ooda.trend("fine", 2)) == 2
    with pytest.raises(NotFound, match="no tool named 'ghost' in tenant 'default'"):
        registry.ooda.trend("ghost")
    undo = registry.ooda.undo(act.id)  # type: ignore[arg-type]
    assert undo.action == "enable" and registry.get("flaky").enabled
    assert undo.reason == f"undo of act {act.id} (disable by disable_failing)"
    assert undo.evidence == {"undoes": act.id, "original_reason": act.reason}
    when = datetime.fromtimestamp(registry.ooda.history()[1].undone_at or 0, UTC)
    with pytest.raises(UsageError, match=rf"already undone by act {undo.id} at {when:%Y-%m-%d}"):
        registry.ooda.undo(act.id)  # type: ignore[arg-type]
    undone_undo = registry.ooda.undo(undo.id)  # type: ignore[arg-type]  # undo the undo
    assert undone_undo.action == "disable" and not registry.get("flaky").enabled
    with pytest.raises(NotFound, match="no OODA act 999999 in tenant 'default'"):
        registry.ooda.undo(999_999)


def test_a_disable_act_carries_its_evidence_and_a_reenable_its_reason(
    open_registry: Opener,
) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"), tool_spec("probe", category="diagnostics"))
    now = time.time()
    start, end = now - 5 * DAY, now - DAY
    log_calls(registry, "flaky", pattern(300, 30), start=start, end=end)
    log_calls(registry, "probe", pattern(250, 50), start=start, end=end)
    report = registry.ooda(now=now)
    [act] = report.acts
    window_start = now - registry.settings.ooda_window_s
    assert act.evidence == {
        "window_start": pytest.approx(window_start), "window_end": pytest.approx(now),
        "calls": 300, "successes": 30, "success_rate": pytest.approx(0.1),
        "policy": {"success_below": 0.5, "calls_above": 200,
                   "protected_categories": ["diagnostics"]},
    }  # fmt: skip
    iso = datetime.fromtimestamp(window_start, UTC).isoformat(timespec="seconds")
    assert act.reason == (
        f"10% of 300 calls succeeded since {iso} (policy: disable below 50% over more than "
        "200 calls)"
    )
    protected = "20% of 250 calls succeeded, but category 'diagnostics' is protected"
    assert report.held[0].reason == protected
    cycle = registry.store.list_cycles(registry.tenant)[0]
    assert cycle["acts"] == 1
    # re-enabled by a person: recorded with the moment it happened, then held while it
    # has too few calls of its own, and left alone once it succeeds on enough
    registry.enable("flaky")
    enabled_at = registry.get("flaky").updated_at
    later = time.time() + 1
    again = registry.ooda(now=later)
    [manual] = again.acts
    assert manual.evidence == {"reverses_act": act.id}
    assert manual.created_at == pytest.approx(enabled_at, abs=1)
    when = datetime.fromtimestamp(manual.created_at, UTC).isoformat(timespec="seconds")
    assert [h.reason for h in again.held if h.tool == "flaky"] == [
        f"re-enabled by a person at {when}; only 0 calls since"
    ]
    log_calls(registry, "flaky", pattern(201, 201), start=later + 1, end=later + 100)
    third = registry.ooda(now=later + 200)
    assert [h.reason for h in third.held if h.tool == "flaky"] == [
        f"re-enabled by a person at {when}; it succeeds since"
    ]
    assert third.acts == [] and registry.get("flaky").enabled


def test_alternatives_skip_the_tool_itself_and_failing_tools_but_not_those_after_them(
    open_registry: Opener,
) -> None:
    registry = open_registry()
    registry.add(
        tool_spec("flaky_api", "Fetch the exchange rate of a currency."),
        tool_spec("broken_twin", "Fetch the exchange rate of a currency."),
        tool_spec("rates_api", "Exchange rate of a currency, from a second provider."),
        tool_spec("untried_rates", "Exchange rate of a currency, from a third provider."),
    )
    now = time.time()
    span = {"start": now - 5 * DAY, "end": now - HOUR}
    log_calls(registry, "flaky_api", pattern(250, 75), **span)
    log_calls(registry, "broken_twin", pattern(100, 10), **span)  # ranked first, failing
    log_calls(registry, "rates_api", pattern(50, 48), **span)
    report = registry.ooda(dry_run=True, now=now)
    flaky = next(f for f in report.findings if f.tool == "flaky_api" and f.alternatives)
    names = [a.tool for a in flaky.alternatives]
    assert sorted(names) == ["rates_api", "untried_rates"]
    relevances = [a.relevance for a in flaky.alternatives]
    assert relevances == sorted(relevances, reverse=True)
    untried = next(a for a in flaky.alternatives if a.tool == "untried_rates")
    assert untried.calls == 0 and untried.success_rate is None
    assert untried.expected_success == pytest.approx(0.9)  # the prior
    rates = next(a for a in flaky.alternatives if a.tool == "rates_api")
    assert rates.expected_success == pytest.approx((48 + 5 * 0.9) / 55, abs=1e-6)
    none = open_registry("quiet", ooda_alternatives=0)
    none.add(
        tool_spec("flaky_api", "Fetch the exchange rate of a currency."),
        tool_spec("rates_api", "Exchange rate of a currency, from a second provider."),
    )
    log_calls(none, "flaky_api", pattern(250, 75), **span)
    found = none.ooda(dry_run=True, now=now).findings
    assert found and all(f.alternatives == [] for f in found)


def _window(durations_ms: list[float], successes: int) -> Any:
    from tooldb.stores.ooda_rows import WindowCounts

    logs = [math.log1p(ms) for ms in durations_ms]
    return WindowCounts(
        calls=len(durations_ms), successes=successes, duration_ms=sum(durations_ms),
        log_sum=sum(logs), log_squares=sum(x * x for x in logs),
    )  # fmt: skip


def _scan(name: str, before: Any, now: Any) -> Any:
    from tooldb.stores.ooda_rows import ToolScan

    return ToolScan(
        id=1, name=name, category="c", description="d", enabled=True, created_at=0.0,
        updated_at=0.0, usage_count=before.calls + now.calls, success_count=0,
        total_duration_ms=0.0, now=now, before=before, p50_ms=None, p95_ms=None,
    )  # fmt: skip


def test_degrading_findings_carry_their_whole_evidence() -> None:
    """Promise (docs/ooda.md): a degrading finding says what it rests on: both windows'
    counts and rates, the typical latencies, the test, its statistic, raw and
    Holm-adjusted p-values, alpha, the threshold and the minimum calls; a p-value below
    double precision reads p<1e-300."""
    from tooldb.ooda.hypothesise import Hypothesiser, Thresholds
    from tooldb.stores.ooda_rows import CallLogScan

    settings = Settings(embedder="hash")
    limits = Thresholds.from_settings(settings)
    falls = _scan("falls", _window([10.0] * 40, 38), _window([10.0] * 40, 0))
    slows = _scan("slows", _window([9.0] * 30, 30), _window([99.0] * 30, 30))
    scan = CallLogScan(tools=[falls, slows], future_calls=0, latest_future=None, orphan_calls=0)
    found = Hypothesiser(limits, end=1000.0, alternatives=lambda tool, every: []).findings(scan)
    success = next(f for f in found if f.tool == "falls" and f.kind.value == "degrading")
    e = success.evidence
    assert success.summary.startswith("success fell from 95% (40 calls) to 0% (40 calls); ")
    assert (e.metric, e.previous_calls, e.previous_successes, e.previous_success_rate) == (
        "success",
        40,
        38,
        0.95,
    )
    assert (e.test, e.alpha, e.threshold, e.min_calls) == ("fisher_exact_one_sided", 0.01, 0.05, 20)
    assert e.p_value is not None and e.p_adjusted is not None and e.p_value < e.p_adjusted < 0.01
    latency = next(f for f in found if f.tool == "slows")
    e = latency.evidence
    assert latency.summary == (
        "typical latency rose 10.00x, from 9 ms to 99 ms; Welch t on log ms p<1e-300 after Holm"
    )
    assert (e.metric, e.previous_calls, e.previous_successes, e.previous_success_rate) == (
        "latency",
        30,
        30,
        1.0,
    )
    assert e.typical_ms == pytest.approx(99.0) and e.previous_typical_ms == pytest.approx(9.0)
    assert e.test == "welch_t_log_ms_one_sided" and e.statistic is not None
    assert e.statistic > 1e3 and e.p_value is not None and e.p_adjusted is not None
    assert e.p_value < 1e-300 and e.p_adjusted < 1e-300
    assert (e.alpha, e.threshold, e.min_calls) == (0.01, 1.25, 20)


def test_findings_at_their_boundaries_and_who_gets_alternatives() -> None:
    """Promise (docs/ooda.md): each finding fires strictly past its setting (a rate at
    the threshold is not low, a p95 at the budget is not slow, a drop or a call count at
    the minimum counts), a never-used tool is one with no call ever, enabled, older than
    the setting; only failing tools (low success, success degrading) get alternatives;
    a significant but small change is no finding."""
    from tooldb.ooda.hypothesise import Hypothesiser, Thresholds
    from tooldb.stores.ooda_rows import CallLogScan, ToolScan

    limits = Thresholds(
        window_s=100.0, low_success_rate=0.5, low_success_min_calls=4, alpha=0.5,
        degrade_min_calls=20, degrade_min_drop=0.25, latency_degrade_ratio=2.0,
        slow_p95_ms=100.0, slow_min_calls=3, never_used_after_s=50.0, alternatives=3,
        alternative_min_relevance=0.1, prior_calls=2.0, prior_success=0.8,
    )  # fmt: skip
    end = 1000.0

    def tool(name: str, now: Any, before: Any = None, **changes: Any) -> ToolScan:
        scan = _scan(name, before or _window([], 0), now)
        fields = {"created_at": 0.0, "p95_ms": None, **changes}
        return ToolScan(**{**scan.__dict__, **fields})

    tools = [
        tool("a_few", _window([5.0] * 19, 19), _window([50.0] * 19, 19)),  # under min calls
        tool("b_at_drop", _window([5.0] * 20, 15), _window([5.0] * 20, 20)),  # drop 0.25
        tool("c_small_drop", _window([5.0] * 400, 380), _window([5.0] * 400, 400)),
        tool("d_bit_slower", _window([10.0] * 30, 30), _window([9.0] * 30, 30)),
        tool("e_half", _window([5.0] * 10, 5)),  # rate at the threshold
        tool("f_low", _window([10.0, 20.0, 30.0, 40.0, 50.0], 1), p95_ms=30.0),
        tool("g_budget", _window([1.0] * 3, 3), p95_ms=100.0),  # p95 at the budget
        tool("h_slow", _window([1.0] * 3, 3), p95_ms=100.5),  # 3 calls: the minimum
        tool("i_two", _window([1.0] * 2, 2), p95_ms=500.0),  # under slow_min_calls
        tool("j_unused", _window([], 0), created_at=end - 50.0, usage_count=0),
        tool("k_used_before", _window([], 0), _window([1.0] * 3, 3), usage_count=0),
        tool("l_used_long_ago", _window([], 0), usage_count=5),
        tool("m_disabled", _window([], 0), usage_count=0, enabled=False),
        tool("n_new", _window([], 0), created_at=end - 49.0, usage_count=0),
        tool("o_slower", _window([99.0] * 30, 30), _window([9.0] * 30, 30)),
    ]
    scan = CallLogScan(tools=tools, future_calls=0, latest_future=None, orphan_calls=0)
    asked: list[str] = []

    def alternatives(failing: ToolScan, every: dict[str, ToolScan]) -> list[Any]:
        asked.append(failing.name)
        return []

    found = Hypothesiser(limits, end, alternatives).findings(scan)
    assert sorted((f.tool, f.kind.value) for f in found) == [
        ("b_at_drop", "degrading"),
        ("f_low", "low_success"),
        ("h_slow", "slow"),
        ("j_unused", "never_used"),
        ("o_slower", "degrading"),
    ]
    assert sorted(asked) == ["b_at_drop", "f_low"]  # not o_slower: slower is not failing
    by_tool = {f.tool: f for f in found}
    assert re.fullmatch(
        r"success fell from 100% \(20 calls\) to 75% \(20 calls\); "
        r"Fisher exact p=0\.12 after Holm",
        by_tool["b_at_drop"].summary,
    ), by_tool["b_at_drop"].summary
    low = by_tool["f_low"].evidence
    assert (low.success_rate, low.avg_ms, low.p95_ms, low.threshold, low.min_calls) == (
        0.2,
        30.0,
        30.0,
        0.5,
        4,
    )
    slow = by_tool["h_slow"].evidence
    assert (slow.threshold, slow.min_calls, slow.avg_ms) == (100.0, 3, 1.0)
    unused = by_tool["j_unused"]
    assert unused.summary == "never called since it was registered on 1970-01-01"
    assert unused.evidence.registered_at == end - 50.0 and unused.evidence.avg_ms is None
