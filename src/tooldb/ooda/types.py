"""Value types of the OODA cycle (optimize.py): figures, findings, acts, the report.

Findings and acts are data: a dry run returns the same objects a real run acts
on, and every act is stored with the evidence that justified it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class FindingKind(StrEnum):
    """What a finding says about a tool."""

    LOW_SUCCESS = "low_success"
    DEGRADING = "degrading"
    SLOW = "slow"
    NEVER_USED = "never_used"


class ToolFigures(BaseModel):
    """A tool's figures over the current window (and counts of the previous one)."""

    model_config = ConfigDict(frozen=True)

    tool: str
    tool_id: int
    category: str
    enabled: bool
    calls: int
    successes: int
    success_rate: float | None
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    previous_calls: int
    previous_success_rate: float | None


class Evidence(BaseModel):
    """What a finding rests on. Counts and rates are over the current window
    [window_start, window_end); ``previous_*`` over the window before it."""

    model_config = ConfigDict(frozen=True)

    window_start: float
    window_end: float
    calls: int
    successes: int
    success_rate: float | None = None
    avg_ms: float | None = None
    p95_ms: float | None = None
    #: Which measure a degrading finding is about: ``success`` or ``latency``.
    metric: Literal["success", "latency"] | None = None
    previous_calls: int | None = None
    previous_successes: int | None = None
    previous_success_rate: float | None = None
    #: Geometric mean of (1 + ms) minus 1, per window: what the latency test compares.
    typical_ms: float | None = None
    previous_typical_ms: float | None = None
    test: str | None = None
    statistic: float | None = None
    p_value: float | None = None
    #: The p-value after Holm's correction over every test of the cycle.
    p_adjusted: float | None = None
    alpha: float | None = None
    #: The setting the figure was compared with, and the minimum calls it needs.
    threshold: float | None = None
    min_calls: int | None = None
    registered_at: float | None = None


class Alternative(BaseModel):
    """A tool selection ranks close to a failing tool for its own description, that
    succeeds more."""

    model_config = ConfigDict(frozen=True)

    tool: str
    relevance: float
    calls: int
    success_rate: float | None
    #: The success selection believes (window figures smoothed towards the prior).
    expected_success: float


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: FindingKind
    tool: str
    tool_id: int
    category: str
    enabled: bool
    summary: str
    evidence: Evidence
    alternatives: list[Alternative] = Field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class Act(BaseModel):
    """One change OODA made (or, in a dry run, would make), or a person's reversal."""

    model_config = ConfigDict(frozen=True)

    id: int | None = None
    cycle_id: int | None = None
    tool: str
    tool_id: int
    action: Literal["disable", "enable"]
    policy: str
    #: ``ooda`` for the cycle, ``person`` for an undo or a re-enable by hand.
    actor: Literal["ooda", "person"]
    reason: str
    evidence: dict[str, Any]
    created_at: float
    reverses: int | None = None
    undone_at: float | None = None
    undone_by: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Act:
        return cls(tool=row["tool_name"], **{k: v for k, v in row.items() if k in _ACT_FIELDS})


_ACT_FIELDS = frozenset(Act.model_fields) - {"tool"}


class Held(BaseModel):
    """A tool the policy matched but did not act on, and why."""

    model_config = ConfigDict(frozen=True)

    tool: str
    reason: str


class OodaReport(BaseModel):
    """One cycle: what was analysed, found, done (or proposed, in a dry run)."""

    tenant: str
    dry_run: bool
    cycle_id: int | None
    started_at: float
    duration_ms: float
    window_start: float
    window_end: float
    tools_analyzed: int
    calls_analyzed: int
    #: Calls stamped in the future (clock skew): left out of every window.
    future_calls: int
    #: Calls in the window whose tool was removed since: left out.
    orphan_calls: int
    figures: list[ToolFigures]
    findings: list[Finding]
    acts: list[Act]
    held: list[Held]
    notes: list[str]
    #: Selection evidence the cycle dropped (registry.prune_evidence): stale, contradicted,
    #: of removed tools; empty in a dry run.
    evidence_pruned: dict[str, int] = Field(default_factory=dict)

    def found(self, kind: FindingKind | str) -> set[str]:
        """Names of the tools with a finding of this kind."""
        return {f.tool for f in self.findings if f.kind == kind}
