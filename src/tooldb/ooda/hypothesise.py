"""Hypothesise: turn a scan of the call log into figures and typed findings.

Pure (no I/O): the thresholds come from settings, the scan from the store, and
the alternatives of a failing tool from a callable the optimiser gives (it uses
selection). Every statistical decision is a test from ``significance``; the
degrading tests of one cycle form one family under Holm's correction, so the
chance that a cycle reports any healthy tool as degrading stays below ``alpha``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ..settings import Settings
from ..stores.ooda_rows import CallLogScan, ToolScan, WindowCounts
from .significance import Moments, fisher_greater, holm, welch_greater
from .types import Alternative, Evidence, Finding, FindingKind, ToolFigures


@dataclass(frozen=True)
class Thresholds:
    """The settings the cycle judges by (see docs/ooda.md)."""

    window_s: float
    low_success_rate: float
    low_success_min_calls: int
    alpha: float
    degrade_min_calls: int
    degrade_min_drop: float
    latency_degrade_ratio: float
    slow_p95_ms: float
    slow_min_calls: int
    never_used_after_s: float
    alternatives: int
    alternative_min_relevance: float
    prior_calls: float
    prior_success: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Thresholds:
        return cls(
            window_s=settings.ooda_window_s,
            low_success_rate=settings.ooda_low_success_rate,
            low_success_min_calls=settings.ooda_low_success_min_calls,
            alpha=settings.ooda_alpha,
            degrade_min_calls=settings.ooda_degrade_min_calls,
            degrade_min_drop=settings.ooda_degrade_min_drop,
            latency_degrade_ratio=settings.ooda_latency_degrade_ratio,
            slow_p95_ms=settings.ooda_slow_p95_ms,
            slow_min_calls=settings.ooda_slow_min_calls,
            never_used_after_s=settings.ooda_never_used_after_s,
            alternatives=settings.ooda_alternatives,
            alternative_min_relevance=settings.ooda_alternative_min_relevance,
            prior_calls=settings.select_prior_calls,
            prior_success=settings.select_prior_success,
        )

    def expected_success(self, counts: WindowCounts) -> float:
        """Selection's belief in a tool's success: the window's rate smoothed to the prior."""
        return (counts.successes + self.prior_calls * self.prior_success) / (
            counts.calls + self.prior_calls
        )


#: Given a failing tool and every tool's scan by name, the better tools near it.
AlternativesOf = Callable[[ToolScan, dict[str, ToolScan]], list[Alternative]]


def rate(counts: WindowCounts) -> float | None:
    return counts.successes / counts.calls if counts.calls else None


def figures(scan: CallLogScan) -> list[ToolFigures]:
    return [
        ToolFigures(
            tool=t.name,
            tool_id=t.id,
            category=t.category,
            enabled=t.enabled,
            calls=t.now.calls,
            successes=t.now.successes,
            success_rate=rate(t.now),
            avg_ms=t.now.duration_ms / t.now.calls if t.now.calls else None,
            p50_ms=t.p50_ms,
            p95_ms=t.p95_ms,
            previous_calls=t.before.calls,
            previous_success_rate=rate(t.before),
        )
        for t in sorted(scan.tools, key=lambda t: t.name)
    ]


class Hypothesiser:
    """Findings over one scan whose current window is [end - window_s, end)."""

    def __init__(self, limits: Thresholds, end: float, alternatives: AlternativesOf) -> None:
        self.limits = limits
        self.start, self.end = end - limits.window_s, end
        self.alternatives = alternatives

    def findings(self, scan: CallLogScan) -> list[Finding]:
        tools = sorted(scan.tools, key=lambda t: t.name)
        by_name = {t.name: t for t in tools}
        found: list[Finding] = []
        for tool in tools:
            found.extend(self._low_success(tool))
            found.extend(self._slow(tool))
            found.extend(self._never_used(tool))
        found.extend(self._degrading(tools))
        failing = sorted({f.tool for f in found if _is_failing(f)})
        better = {name: self.alternatives(by_name[name], by_name) for name in failing}
        return [
            f.model_copy(update={"alternatives": better[f.tool]}) if _is_failing(f) else f
            for f in sorted(found, key=lambda f: (f.tool, f.kind.value))
        ]

    def _evidence(self, tool: ToolScan, **extra: object) -> Evidence:
        now = tool.now
        return Evidence(
            window_start=self.start, window_end=self.end, calls=now.calls,
            successes=now.successes, success_rate=rate(now),
            avg_ms=now.duration_ms / now.calls if now.calls else None, p95_ms=tool.p95_ms,
            **extra,
        )  # fmt: skip

    def _finding(
        self, kind: FindingKind, tool: ToolScan, summary: str, evidence: Evidence
    ) -> Finding:
        return Finding(
            kind=kind, tool=tool.name, tool_id=tool.id, category=tool.category,
            enabled=tool.enabled, summary=summary, evidence=evidence,
        )  # fmt: skip

    def _low_success(self, tool: ToolScan) -> list[Finding]:
        limits, success = self.limits, rate(tool.now)
        if tool.now.calls <= limits.low_success_min_calls or success is None:
            return []
        if success >= limits.low_success_rate:
            return []
        summary = (
            f"{success:.0%} of {tool.now.calls} calls succeeded in the window "
            f"(below {limits.low_success_rate:.0%})"
        )
        evidence = self._evidence(
            tool, threshold=limits.low_success_rate, min_calls=limits.low_success_min_calls
        )
        return [self._finding(FindingKind.LOW_SUCCESS, tool, summary, evidence)]

    def _slow(self, tool: ToolScan) -> list[Finding]:
        limits = self.limits
        if tool.now.calls < limits.slow_min_calls or tool.p95_ms is None:
            return []
        if tool.p95_ms <= limits.slow_p95_ms:
            return []
        summary = (
            f"p95 {tool.p95_ms:.0f} ms over {tool.now.calls} calls "
            f"(budget {limits.slow_p95_ms:.0f} ms)"
        )
        evidence = self._evidence(
            tool, threshold=limits.slow_p95_ms, min_calls=limits.slow_min_calls
        )
        return [self._finding(FindingKind.SLOW, tool, summary, evidence)]

    def _never_used(self, tool: ToolScan) -> list[Finding]:
        if not tool.enabled or tool.usage_count or tool.now.calls or tool.before.calls:
            return []
        if tool.created_at > self.end - self.limits.never_used_after_s:
            return []
        when = datetime.fromtimestamp(tool.created_at, UTC).date().isoformat()
        summary = f"never called since it was registered on {when}"
        evidence = self._evidence(tool, registered_at=tool.created_at)
        return [self._finding(FindingKind.NEVER_USED, tool, summary, evidence)]

    def _degrading(self, tools: list[ToolScan]) -> list[Finding]:
        """Success (Fisher exact) and latency (Welch on log ms) of every tool with
        enough calls in both windows, Holm-corrected as one family."""
        limits = self.limits
        tests: list[tuple[ToolScan, str, float, float, float]] = []
        for tool in tools:
            now, before = tool.now, tool.before
            if min(now.calls, before.calls) < limits.degrade_min_calls:
                continue
            p = fisher_greater(
                now.calls - now.successes, now.calls, before.calls - before.successes, before.calls
            )
            drop = (rate(before) or 0.0) - (rate(now) or 0.0)
            tests.append((tool, "success", p, drop, math.nan))
            welch = welch_greater(_moments(now), _moments(before))
            ratio = math.exp(_moments(now).mean - _moments(before).mean)
            tests.append((tool, "latency", welch.p_value, ratio, welch.t))
        adjusted = holm([p for _, _, p, _, _ in tests])
        found = []
        for (tool, metric, p, effect, t), p_adj in zip(tests, adjusted, strict=True):
            if p_adj >= limits.alpha:
                continue
            if metric == "success" and effect >= limits.degrade_min_drop:
                found.append(self._success_degraded(tool, p, p_adj, effect))
            elif metric == "latency" and effect >= limits.latency_degrade_ratio:
                found.append(self._latency_degraded(tool, p, p_adj, effect, t))
        return found

    def _success_degraded(self, tool: ToolScan, p: float, p_adj: float, drop: float) -> Finding:
        before_rate, now_rate = rate(tool.before) or 0.0, rate(tool.now) or 0.0
        summary = (
            f"success fell from {before_rate:.0%} ({tool.before.calls} calls) to {now_rate:.0%} "
            f"({tool.now.calls} calls); Fisher exact {_p(p_adj)} after Holm"
        )
        evidence = self._evidence(
            tool, metric="success", previous_calls=tool.before.calls,
            previous_successes=tool.before.successes, previous_success_rate=before_rate,
            test="fisher_exact_one_sided", p_value=p, p_adjusted=p_adj,
            alpha=self.limits.alpha, threshold=self.limits.degrade_min_drop,
            min_calls=self.limits.degrade_min_calls,
        )  # fmt: skip
        return self._finding(FindingKind.DEGRADING, tool, summary, evidence)

    def _latency_degraded(
        self, tool: ToolScan, p: float, p_adj: float, ratio: float, t: float
    ) -> Finding:
        typical_now = math.exp(_moments(tool.now).mean) - 1.0
        typical_before = math.exp(_moments(tool.before).mean) - 1.0
        summary = (
            f"typical latency rose {ratio:.2f}x, from {typical_before:.0f} ms to "
            f"{typical_now:.0f} ms; Welch t on log ms {_p(p_adj)} after Holm"
        )
        evidence = self._evidence(
            tool, metric="latency", previous_calls=tool.before.calls,
            previous_successes=tool.before.successes, previous_success_rate=rate(tool.before),
            typical_ms=typical_now, previous_typical_ms=typical_before,
            test="welch_t_log_ms_one_sided", statistic=t, p_value=p, p_adjusted=p_adj,
            alpha=self.limits.alpha, threshold=self.limits.latency_degrade_ratio,
            min_calls=self.limits.degrade_min_calls,
        )  # fmt: skip
        return self._finding(FindingKind.DEGRADING, tool, summary, evidence)


def _p(value: float) -> str:
    """A p-value for a summary line (below double precision, say so rather than 0)."""
    return f"p={value:.2g}" if value >= 1e-300 else "p<1e-300"


def _moments(counts: WindowCounts) -> Moments:
    return Moments(counts.calls, counts.log_sum, counts.log_squares)


def _is_failing(finding: Finding) -> bool:
    return finding.kind is FindingKind.LOW_SUCCESS or (
        finding.kind is FindingKind.DEGRADING and finding.evidence.metric == "success"
    )
