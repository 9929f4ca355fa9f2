"""The OODA simulation (tests/ooda_sim.py): 20,000 calls whose tools selection picks,
with planted failing, degrading and slow tools. OODA must find exactly the planted
ones, disable only those its policy allows, and selection's top-1 success must rise.

The numbers (also printed by ``bench/ooda.py --simulation``): top-1 success over the
task mix 0.686 before the cycle, 0.835 after (seed 7, both stores).
"""

from __future__ import annotations

import sys

import tooldb
from tooldb import Settings

from .ooda_sim import (
    EXPECTED_DISABLED,
    EXPECTED_FINDINGS,
    EXPECTED_HELD,
    TASKS,
    WINDOW_S,
    Simulation,
)


def test_ooda_finds_the_planted_tools_and_selection_improves(store_url: str) -> None:
    settings = Settings(
        embedder="hash", url=store_url, ooda_window_s=WINDOW_S, ooda_never_used_after_s=0.0
    )
    with tooldb.open(store_url, settings=settings) as registry:
        sim = Simulation(registry)
        sim.register()
        sim.drive()
        assert registry.store.count_calls(registry.tenant) == sim.calls
        before = sim.expected_top1_success()
        report = registry.ooda(now=sim.end)

        found = {(f.kind.value, f.tool) for f in report.findings if f.kind != "never_used"}
        planted = {pair for pair in EXPECTED_FINDINGS if pair[0] != "never_used"}
        assert found == planted  # every planted tool, and no healthy one
        unused = {f.tool for f in report.figures if f.calls == 0 and f.previous_calls == 0}
        assert report.found("never_used") == unused and "fax_document" in unused
        assert {a.tool for a in report.acts if a.action == "disable"} == EXPECTED_DISABLED
        assert {h.tool for h in report.held} == EXPECTED_HELD
        for name in EXPECTED_DISABLED:
            assert not registry.get(name).enabled
        assert registry.get("check_service_health").enabled  # protected: found, not disabled
        degrading = {f.tool: f.evidence for f in report.findings if f.kind == "degrading"}
        assert degrading["geocode_address"].metric == "latency"
        assert degrading["send_email"].metric == "success"
        assert all(e.p_adjusted is not None and e.p_adjusted < 0.01 for e in degrading.values())
        alternatives = {
            f.tool: [a.tool for a in f.alternatives]
            for f in report.findings
            if f.kind == "low_success"
        }
        assert alternatives["weather_forecast"][0] == "weather_backup"  # untried: the prior
        assert alternatives["send_email"][0] == "mail_relay"

        after = sim.expected_top1_success()
        choices = sim.choices()
        assert {choices[t] for t in TASKS["weather"]} == {"weather_backup"}
        assert {choices[t] for t in TASKS["email"]} == {"mail_relay"}
        window = sum(f.successes for f in report.figures) / report.calls_analyzed
        sys.stdout.write(
            f"\nOODA simulation ({registry.store.dialect}): {sim.calls} calls, "
            f"success in the window {window:.3f}; top-1 expected success "
            f"{before:.3f} before the cycle, {after:.3f} after\n"
        )
        assert after > before + 0.1
