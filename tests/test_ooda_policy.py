"""OODA's act stage at its edges: the lease a cycle must still hold to act, re-enables
by hand reconciled and judged on their own calls, a disable that races a person, the
windows' bounds, the alternatives' boundaries, the notes, and the listing defaults."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest

from tooldb import NotFound, Registry, StoreError

from .ooda_support import DAY, HOUR, Opener, log_calls, pattern, tool_spec

RATES = "Fetch the exchange rate of a currency."


def _disabled_then_reenabled_by_hand(registry: Registry) -> float:
    """A tool "flaky" that OODA disabled (30 of 300 calls ok, days ago) and a person
    re-enabled; the moment just after, from which its new calls count."""
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    [disable] = registry.ooda(now=now).acts
    registry.ooda.undo(disable.id)  # type: ignore[arg-type]
    return time.time() + 1


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def test_a_cycle_that_outlived_its_lease_does_not_act(
    open_registry: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cycle renews its lease before acting: one whose lease expired and was taken by
    another cycle during its scan raises and disables nothing."""
    registry = open_registry(ooda_lock_ttl_s=0.05)
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    store, scan = registry.store, registry.store.scan_call_log

    def slow_scan(*args: Any) -> Any:  # another cycle takes the expired lease meanwhile
        result = scan(*args)
        time.sleep(0.2)
        assert store.acquire_ooda_lock(registry.tenant, "host:9:other", 60.0)[0]
        return result

    monkeypatch.setattr(store, "scan_call_log", slow_scan)
    with pytest.raises(StoreError, match=r"outlived its lease \(ooda_lock_ttl_s 0.05 s\)"):
        registry.ooda(now=now)
    assert registry.get("flaky").enabled and registry.ooda.history() == []
    [cycle] = registry.store.list_cycles(registry.tenant)
    assert cycle["acts"] == 0  # analysed, then stopped before acting


def test_reenables_by_hand_are_reconciled_past_tools_still_disabled(
    open_registry: Opener,
) -> None:
    """Each OODA disable a person reversed by hand is recorded (once, with the moment
    of the re-enable), whatever the order of the disables still in force; a dry run
    reports it without storing it."""
    registry = open_registry()
    names = ("a_flaky", "b_flaky", "c_flaky")
    registry.add(*(tool_spec(n) for n in names))
    now = time.time()
    for name in names:
        log_calls(registry, name, pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    disables = {a.tool: a for a in registry.ooda(now=now).acts}
    assert sorted(disables) == list(names)
    registry.enable("b_flaky")  # the middle act: after a disable in force either way
    enabled_at = registry.get("b_flaky").updated_at
    time.sleep(0.01)
    before = time.time()
    dry = registry.ooda(dry_run=True, now=before)
    assert [(a.id, a.tool, a.policy) for a in dry.acts] == [(None, "b_flaky", "manual_enable")]
    assert len(registry.ooda.history()) == 3  # the dry run stored nothing
    [manual] = registry.ooda(now=before).acts
    assert (manual.tool, manual.policy, manual.reverses) == (
        "b_flaky", "manual_enable", disables["b_flaky"].id,
    )  # fmt: skip
    assert manual.created_at == enabled_at < before  # when it happened, not when seen
    assert registry.ooda(now=before + 1).acts == []  # reconciled once


def test_a_reenabled_tool_with_only_the_minimum_calls_since_is_held(
    open_registry: Opener,
) -> None:
    """After a re-enable, a tool needs more than ``ooda_disable_min_calls`` calls of its
    own to be judged: at exactly the minimum, failing all, it is held for too few calls
    (not said to succeed); one more and it is disabled again."""
    registry = open_registry()
    later = _disabled_then_reenabled_by_hand(registry)
    log_calls(registry, "flaky", [False] * 200, start=later, end=later + 100)
    report = registry.ooda(now=later + 200)
    assert report.acts == [] and registry.get("flaky").enabled
    [held] = report.held
    assert held.reason.endswith("; only 200 calls since")
    log_calls(registry, "flaky", [False], start=later + 150, end=later + 160)
    again = registry.ooda(now=later + 200)
    assert [(a.tool, a.action) for a in again.acts] == [("flaky", "disable")]


def test_a_tool_a_person_disables_during_the_cycle_gets_no_act(
    open_registry: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disable applies only to a tool still enabled: one a person disabled between the
    scan and the act is left to the person, with no OODA act recorded."""
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    store, overrides = registry.store, registry.store.overrides

    def person_disables_first(tenant: str) -> dict[int, float]:
        registry.disable("flaky")
        return overrides(tenant)

    monkeypatch.setattr(store, "overrides", person_disables_first)
    report = registry.ooda(now=now)
    assert report.acts == [] and registry.ooda.history() == []
    assert not registry.get("flaky").enabled


def test_the_windows_reach_back_two_windows_and_no_further(open_registry: Opener) -> None:
    """The window is the last ``ooda_window_s`` before ``now``, the previous window the
    one before it; older calls are in neither."""
    registry = open_registry(ooda_window_s=DAY)
    registry.add(tool_spec("steady"))
    now = time.time()
    log_calls(registry, "steady", [True] * 7, start=now - 2.9 * DAY, end=now - 2.1 * DAY)
    log_calls(registry, "steady", [True] * 5, start=now - 1.9 * DAY, end=now - 1.1 * DAY)
    log_calls(registry, "steady", [False] * 3, start=now - 0.9 * DAY, end=now - 0.1 * DAY)
    report = registry.ooda(now=now)
    [figures] = report.figures
    assert (figures.calls, figures.successes, figures.previous_calls) == (3, 0, 5)
    assert (report.window_start, report.window_end) == (now - DAY, now)
    assert report.calls_analyzed == 3


def test_a_trend_row_with_no_calls_has_no_success_rate(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("idle"))
    registry.ooda()
    [row] = registry.ooda.trend("idle")
    assert row["calls"] == 0 and row["success_rate"] is None


def test_history_and_trend_give_fifty_rows_by_default(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    act = registry.ooda(now=now).acts[0]
    for _ in range(50):  # undo the last act each time: 51 acts in all
        act = registry.ooda.undo(act.id)  # type: ignore[arg-type]
    assert len(registry.ooda.history()) == 50 and len(registry.ooda.history(51)) == 51
    for later in range(50):
        registry.ooda(now=now + 1 + later)
    assert len(registry.ooda.trend("flaky")) == 50 and len(registry.ooda.trend("flaky", 60)) == 51


def _alternatives(report: Any, tool: str) -> list[str]:
    found = [f for f in report.findings if f.tool == tool and f.alternatives]
    return sorted(a.tool for f in found for a in f.alternatives)


def test_alternatives_at_their_boundaries(open_registry: Opener) -> None:
    """An alternative must be at least as relevant as ``ooda_alternative_min_relevance``
    (equal is enough), expect strictly more success than the failing tool and not fail
    itself (an expected success at the low-success rate is not failing); selection's
    internal ranking is not recorded as a decision; ``ooda_alternatives`` caps them."""
    registry = open_registry(ooda_low_success_rate=0.9, ooda_alternative_min_relevance=0.0)
    registry.add(
        tool_spec("flaky_api", RATES),
        tool_spec("untried", RATES),  # expects the prior, 0.9: the low-success rate
        tool_spec("proven", RATES),
        tool_spec("meh", RATES),  # better than flaky_api, but failing itself
    )
    now = time.time()
    start, end = now - 5 * DAY, now - HOUR
    log_calls(registry, "flaky_api", pattern(250, 75), start=start, end=end)
    log_calls(registry, "proven", pattern(50, 50), start=start, end=end)
    log_calls(registry, "meh", pattern(100, 60), start=start, end=end)
    report = registry.ooda(dry_run=True, now=now)
    assert _alternatives(report, "flaky_api") == ["proven", "untried"]
    registry.add(tool_spec("dead_api", RATES))  # none of its calls succeeds: all better
    log_calls(registry, "dead_api", [False] * 150, start=start, end=end)
    report = registry.ooda(dry_run=True, now=now)
    assert _alternatives(report, "dead_api") == ["proven", "untried"]
    assert registry.store.list_decisions(registry.tenant) == []
    [flaky] = [f for f in report.findings if f.tool == "flaky_api" and f.alternatives]
    relevance = min(a.relevance for a in flaky.alternatives)
    exact = open_registry(ooda_low_success_rate=0.9, ooda_alternative_min_relevance=relevance)
    assert _alternatives(exact.ooda(dry_run=True, now=now), "flaky_api") == ["proven", "untried"]
    one = open_registry(ooda_low_success_rate=0.9, ooda_alternatives=1)
    assert len(_alternatives(one.ooda(dry_run=True, now=now), "flaky_api")) == 1


def test_an_alternative_expecting_what_the_tool_does_is_not_better(
    open_registry: Opener,
) -> None:
    """A degrading tool now at 90% gets no alternative expecting 90% (an untried tool at
    the prior), only one expecting more; one at 80%, which expects a little more of
    itself (smoothed towards the prior), is not its own alternative."""
    registry = open_registry(ooda_alternative_min_relevance=0.0)
    names = ("falls", "sags", "untried", "one_ok")
    registry.add(*(tool_spec(name, RATES) for name in names))
    now = time.time()
    window = registry.settings.ooda_window_s
    for name, now_successes in (("falls", 90), ("sags", 80)):
        log_calls(registry, name, [True] * 100, start=now - 1.9 * window, end=now - 1.1 * window)
        log_calls(registry, name, pattern(100, now_successes), start=now - 0.9 * window,
                  end=now - HOUR)  # fmt: skip
    log_calls(registry, "one_ok", [True], start=now - 0.5 * window, end=now - HOUR)
    report = registry.ooda(dry_run=True, now=now)
    assert ("degrading", "falls") in {(f.kind.value, f.tool) for f in report.findings}
    assert _alternatives(report, "falls") == ["one_ok"]
    assert ("degrading", "sags") in {(f.kind.value, f.tool) for f in report.findings}
    assert _alternatives(report, "sags") == ["falls", "one_ok", "untried"]


def test_the_notes_say_what_was_left_out(open_registry: Opener) -> None:
    registry = open_registry()
    registry.add(tool_spec("skewed"), tool_spec("gone"))
    now = time.time()
    ahead, beyond = now + HOUR, now + 2 * HOUR
    log_calls(registry, "skewed", [True] * 3, start=ahead, end=beyond)
    log_calls(registry, "gone", [True] * 2, start=now - 2 * DAY, end=now - DAY)
    registry.remove("gone")
    latest = ahead + 2.5 * ((beyond - ahead) / 3)  # the last stamp, computed as log_calls does
    assert registry.ooda(now=now).notes == [
        f"3 calls are stamped in the future (latest {_iso(latest)}): clock skew; they are "
        "in no window",
        "2 calls in the window belong to tools removed since: left out",
        "no calls in the window: nothing to judge but unused tools",
    ]
    window = registry.settings.ooda_window_s
    log_calls(registry, "skewed", [True], start=now - 1.5 * window, end=now - 1.4 * window)
    assert not any("no calls" in n for n in registry.ooda(now=now).notes)  # one before


def test_alternatives_are_looked_for_past_the_first_few_candidates(
    open_registry: Opener,
) -> None:
    """Selection is asked for ``ooda_alternatives`` + 10 candidates, so a better tool
    ranked below five failing twins is still found."""
    # untried twins (0.9 expected) count as failing; rates_api's relevance is about 0.45
    registry = open_registry(ooda_low_success_rate=0.95, ooda_alternative_min_relevance=0.4)
    twins = [f"twin_{i}" for i in range(6)]
    registry.add(
        tool_spec("flaky_api", RATES),
        *(tool_spec(name, RATES) for name in twins),
        tool_spec("rates_api", "Exchange rate of a currency, from a second provider."),
    )
    now = time.time()
    start, end = now - 5 * DAY, now - HOUR
    log_calls(registry, "flaky_api", pattern(250, 75), start=start, end=end)
    log_calls(registry, "rates_api", pattern(100, 100), start=start, end=end)
    assert "rates_api" not in registry.select(RATES, k=5, record=False).names
    report = registry.ooda(dry_run=True, now=now)
    assert _alternatives(report, "flaky_api") == ["rates_api"]


def test_a_tool_removed_while_its_act_is_undone_is_not_found(
    open_registry: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = open_registry()
    registry.add(tool_spec("flaky"))
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    [act] = registry.ooda(now=now).acts
    store, acquire = registry.store, registry.store.acquire_ooda_lock

    def removed_first(*args: Any) -> Any:  # a person removes the tool meanwhile
        registry.remove("flaky")
        return acquire(*args)

    monkeypatch.setattr(store, "acquire_ooda_lock", removed_first)
    with pytest.raises(NotFound, match=f"tool 'flaky' was removed while undoing act {act.id}"):
        registry.ooda.undo(act.id)  # type: ignore[arg-type]


def test_equally_relevant_alternatives_come_most_expected_first(open_registry: Opener) -> None:
    registry = open_registry(ooda_alternatives=10, ooda_alternative_min_relevance=0.0)
    twins = [f"twin_{i}" for i in range(6)]
    registry.add(tool_spec("flaky_api", RATES), *(tool_spec(name, RATES) for name in twins))
    now = time.time()
    start, end = now - 5 * DAY, now - HOUR
    log_calls(registry, "flaky_api", pattern(250, 75), start=start, end=end)
    for i, name in enumerate(twins):
        log_calls(registry, name, pattern(100, 94 + i), start=start, end=end)
    report = registry.ooda(dry_run=True, now=now)
    [flaky] = [f for f in report.findings if f.tool == "flaky_api" and f.alternatives]
    found = flaky.alternatives
    assert sorted(a.tool for a in found) == twins
    ties = [(a, b) for a, b in pairwise(found) if a.relevance == b.relevance]
    assert ties  # the hash embedder ranks some twins equally
    assert all(a.expected_success > b.expected_success for a, b in ties)
    keys = [(-a.relevance, -a.expected_success) for a in found]
    assert keys == sorted(keys)


def test_a_cycle_prunes_evidence_at_its_own_clock_and_says_so(open_registry: Opener) -> None:
    """A real cycle (not a dry run) drops the evidence of removed tools and, on the
    cycle's clock (``now``), evidence not seen for ``evidence_max_age_s``; the counts
    are in the report and, when any, in its notes."""
    registry = open_registry()
    registry.add(tool_spec("rates", RATES), tool_spec("gone"))
    assert registry.learn("convert dollars to euros", "rates")
    assert registry.learn("probe the gone service", "gone")
    registry.remove("gone")
    assert registry.ooda(dry_run=True).evidence_pruned == {} and len(registry.evidence()) == 2
    report = registry.ooda()
    assert report.evidence_pruned == {"stale": 0, "contradicted": 0, "removed tools": 1}
    assert report.notes[-1] == "evidence pruned: 0 stale, 0 contradicted, 1 removed tools"
    assert [row.tool for row in registry.evidence()] == ["rates"]
    quiet = registry.ooda()
    assert not any("evidence pruned" in note for note in quiet.notes)
    later = time.time() + registry.settings.evidence_max_age_s + 60
    assert registry.ooda(now=later).evidence_pruned["stale"] == 1
    assert registry.evidence() == []


def test_a_reenabled_tool_that_no_longer_fails_is_neither_held_nor_acted_on(
    open_registry: Opener,
) -> None:
    """Held is for a re-enabled tool its whole window would still condemn; once its
    calls since and the window both pass, the cycle says nothing about it."""
    registry = open_registry()
    later = _disabled_then_reenabled_by_hand(registry)
    log_calls(registry, "flaky", [True] * 400, start=later, end=later + 100)
    report = registry.ooda(now=later + 200)  # 430 of 700 in the window: 61%
    assert report.acts == [] and report.held == [] and registry.get("flaky").enabled


def test_alternatives_are_ranked_for_what_the_tool_does_not_its_name(
    open_registry: Opener,
) -> None:
    registry = open_registry()
    registry.add(
        tool_spec("fx_v1", RATES),
        tool_spec("rates_api", "Exchange rate of a currency, from a second provider."),
        tool_spec("fx_v2", "Send a text message to a phone."),
        tool_spec("fx_v3", "Resize an image file."),
    )
    now = time.time()
    start, end = now - 5 * DAY, now - HOUR
    log_calls(registry, "fx_v1", pattern(250, 75), start=start, end=end)
    log_calls(registry, "rates_api", pattern(50, 48), start=start, end=end)
    report = registry.ooda(dry_run=True, now=now)
    [fx] = [f for f in report.findings if f.tool == "fx_v1" and f.alternatives]
    assert fx.alternatives[0].tool == "rates_api"


def test_a_candidate_below_the_relevance_floor_does_not_hide_those_ranked_after_it(
    open_registry: Opener,
) -> None:
    """Selection ranks by its final score, which a tool's record raises: a fast, always
    successful but barely relevant tool can rank above a relevant one, which is still
    an alternative."""
    registry = open_registry(ooda_alternative_min_relevance=0.58)
    registry.add(
        tool_spec("fx_v1", RATES),
        tool_spec("rates_api", "Exchange rate of a currency, from a second provider."),
        tool_spec("fx_v2", "Send a text message to a phone."),  # relevance about 0.6
        tool_spec("fx_v3", "Resize an image file."),  # about 0.54
    )
    now = time.time()
    start, end = now - 5 * DAY, now - HOUR
    log_calls(registry, "fx_v1", pattern(250, 75), start=start, end=end)
    log_calls(registry, "rates_api", pattern(50, 48), start=start, end=end)
    log_calls(registry, "fx_v3", [True] * 200, start=start, end=end, durations=[1.0] * 200)
    log_calls(registry, "fx_v2", pattern(20, 15), start=start, end=end, durations=[5e3] * 20)
    ranked = registry.select(RATES, k=4, record=False).candidates
    assert [c.name for c in ranked][2:] == ["fx_v3", "fx_v2"]
    assert ranked[2].relevance < 0.58 <= ranked[3].relevance
    report = registry.ooda(dry_run=True, now=now)
    assert _alternatives(report, "fx_v1") == ["fx_v2", "rates_api"]
