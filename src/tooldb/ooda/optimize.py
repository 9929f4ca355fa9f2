"""OODA: the registry watches its tools and acts on the ones that fail.

* **Analyse** (observe, orient): one snapshot scan of the call log per tenant gives
  each tool's calls, successes, average, median and p95 over the window (default 7
  days) and the window before it. The figures go on the tool, where selection
  reads them at once (``live_stats``: window figures plus calls since), and into
  ``tool_stats_history``, one row per tool per analysis (the trend).
* **Hypothesise** (hypothesise.py): typed findings with their evidence — low
  success, degrading (Fisher exact / Welch on log latency, Holm-corrected), slow,
  never used — and for each failing tool the better tools selection ranks near it.
* **Act** (decide, act): a policy disables a tool whose window success is below
  ``ooda_disable_success_rate`` over more than ``ooda_disable_min_calls`` calls,
  unless its category is protected. Each act is stored with its reason, evidence
  and policy in the same transaction as the change, and ``undo`` reverses it. A
  tool a person re-enabled is judged again only on calls made after that.

A real cycle holds the tenant's lease (``ooda_locks``) from scan to last act, so
concurrent cycles never act twice; a dry run reads only and takes no lease.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, StoreError, UsageError
from ..stores.ooda_rows import CallLogScan, ToolScan
from .hypothesise import Hypothesiser, Thresholds, figures, rate
from .types import Act, Alternative, Finding, Held, OodaReport

if TYPE_CHECKING:
    from ..registry import Registry

POLICY = "disable_failing"
#: How long an undo waits for a running cycle to finish before it gives up.
UNDO_WAIT_S = 30.0
_POLL_S = 0.1


class Optimizer:
    """The OODA cycle of one registry's tenant: ``registry.ooda(...)`` runs it."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.store = registry.store
        self.tenant = registry.tenant
        self.settings = registry.settings

    def __call__(
        self, *, dry_run: bool = False, wait_s: float | None = None, now: float | None = None
    ) -> OodaReport:
        """Run one cycle. ``dry_run`` changes nothing and returns what would be done.
        ``wait_s`` (default: setting ``ooda_lock_wait_s``) is how long to wait for
        another cycle of the tenant; past it, StoreError says who holds it. ``now`` is
        the end of the window (default: the current time; calls after it are skew)."""
        return self.run(dry_run=dry_run, wait_s=wait_s, now=now)

    def run(
        self, *, dry_run: bool = False, wait_s: float | None = None, now: float | None = None
    ) -> OodaReport:
        if dry_run:
            return self._cycle(True, now, None)
        with self._lease(self.settings.ooda_lock_wait_s if wait_s is None else wait_s) as holder:
            return self._cycle(False, now, holder)

    def findings(self, *, now: float | None = None) -> list[Finding]:
        """The findings of a fresh analysis (read-only)."""
        return self.run(dry_run=True, now=now).findings

    def history(self, limit: int = 50) -> list[Act]:
        """Acts newest first: OODA's disables, undos and re-enables by hand."""
        if limit < 0:
            raise UsageError(f"limit must be 0 or more, got {limit}")
        return [Act.from_row(row) for row in self.store.list_acts(self.tenant, limit=limit)]

    def trend(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """A tool's windowed figures at each analysis, newest first."""
        rows = self.store.stats_history(self.tenant, name, limit)
        if not rows and self.store.get_tool(self.tenant, name) is None:
            raise NotFound(f"no tool named {name!r} in tenant {self.tenant!r}")
        for row in rows:
            row["success_rate"] = row["successes"] / row["calls"] if row["calls"] else None
        return rows

    def undo(self, act_id: int) -> Act:
        """Reverse an act (a disable re-enables the tool); recorded as an act itself."""
        act = self.store.get_act(self.tenant, act_id)
        if act is None:
            raise NotFound(f"no OODA act {act_id} in tenant {self.tenant!r}")
        if act["undone_at"] is not None:
            raise UsageError(
                f"act {act_id} was already undone by act {act['undone_by']} "
                f"at {_iso(act['undone_at'])}"
            )
        tool = self.store.get_tool(self.tenant, act["tool_name"])
        if tool is None or tool.id != act["tool_id"]:
            raise NotFound(
                f"tool {act['tool_name']!r} of act {act_id} was removed since; nothing to undo"
            )
        enable = act["action"] == "disable"
        row = _act_row(
            self.tenant, tool.id, tool.name, "enable" if enable else "disable", "undo", "person",
            f"undo of act {act_id} ({act['action']} by {act['policy']})",
            {"undoes": act_id, "original_reason": act["reason"]}, reverses=act_id,
        )  # fmt: skip
        with self._lease(UNDO_WAIT_S):
            act_id_new = self.store.apply_act(row, set_enabled=enable, only_if_enabled=None)
        if act_id_new is None:
            raise NotFound(f"tool {tool.name!r} was removed while undoing act {act_id}")
        return Act(id=act_id_new, tool=tool.name, **_act_fields(row))

    # -- the cycle -------------------------------------------------------------
    def _cycle(self, dry_run: bool, now: float | None, holder: str | None) -> OodaReport:
        started = time.time()
        end = started if now is None else now
        limits = Thresholds.from_settings(self.settings)
        start, middle = end - 2 * limits.window_s, end - limits.window_s
        scan = self.store.scan_call_log(self.tenant, start, middle, end)
        found = Hypothesiser(limits, end, self._alternatives).findings(scan)
        notes = _notes(scan)
        cycle_id = None
        if not dry_run:
            cycle_id = self.store.apply_analysis(
                self.tenant, scan, end, limits.window_s,
                {
                    "started_at": started, "ended_at": time.time(),
                    "window_s": limits.window_s, "tools_analyzed": len(scan.tools),
                    "calls_analyzed": sum(t.now.calls for t in scan.tools),
                    "findings": [f.as_json() for f in found], "acts": 0, "notes": notes,
                },
            )  # fmt: skip
        if holder is not None and not self.store.renew_ooda_lock(
            self.tenant, holder, self.settings.ooda_lock_ttl_s
        ):
            raise StoreError(
                f"this OODA cycle outlived its lease (ooda_lock_ttl_s "
                f"{self.settings.ooda_lock_ttl_s:g} s) and another took over: it did not act"
            )
        acts, held = Policy(self, scan, middle, end, cycle_id).apply(dry_run)
        pruned = {} if dry_run else self.registry.prune_evidence(now=end)  # learning from use
        if any(pruned.values()):
            notes = [*notes, "evidence pruned: " + ", ".join(f"{n} {k}" for k, n in pruned.items())]
        if cycle_id is not None:
            self.store.finish_cycle(
                self.tenant, cycle_id, {"ended_at": time.time(), "acts": len(acts)}
            )
        return OodaReport(
            tenant=self.tenant, dry_run=dry_run, cycle_id=cycle_id, started_at=started,
            duration_ms=(time.time() - started) * 1000, window_start=middle, window_end=end,
            tools_analyzed=len(scan.tools), calls_analyzed=sum(t.now.calls for t in scan.tools),
            future_calls=scan.future_calls, orphan_calls=scan.orphan_calls,
            figures=figures(scan), findings=found, acts=acts, held=held, notes=notes,
            evidence_pruned=pruned,
        )  # fmt: skip

    def _alternatives(self, tool: ToolScan, by_name: dict[str, ToolScan]) -> list[Alternative]:
        """Tools selection ranks close to ``tool`` for its own description that succeed
        more, as selection believes it (window figures smoothed towards the prior, so an
        untried tool counts as the prior), and are not failing themselves."""
        limits = Thresholds.from_settings(self.settings)
        if limits.alternatives == 0:
            return []
        own = rate(tool.now) or 0.0
        selection = self.registry.select(
            tool.description or tool.name, k=limits.alternatives + 10, record=False
        )
        better = []
        for candidate in selection.candidates:
            other = by_name.get(candidate.name)
            if other is None or other.id == tool.id:
                continue
            expected = limits.expected_success(other.now)
            if candidate.relevance < limits.alternative_min_relevance:
                continue
            if expected <= own or expected < limits.low_success_rate:
                continue  # not better, or failing itself
            better.append(
                Alternative(
                    tool=other.name,
                    relevance=candidate.relevance,
                    calls=other.now.calls,
                    success_rate=rate(other.now),
                    expected_success=round(expected, 6),
                )
            )
        better.sort(key=lambda a: (-a.relevance, -a.expected_success, a.tool))
        return better[: limits.alternatives]

    @contextmanager
    def _lease(self, wait_s: float) -> Iterator[str]:
        if wait_s < 0:
            raise UsageError(f"wait must be 0 or more seconds, got {wait_s}")
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        ttl = self.settings.ooda_lock_ttl_s
        deadline = time.monotonic() + wait_s
        while True:
            taken, owner, since = self.store.acquire_ooda_lock(self.tenant, holder, ttl)
            if taken:
                break
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"another OODA cycle is running for tenant {self.tenant!r} "
                    f"(holder {owner}, since {_iso(since)}); it frees the tenant when it "
                    f"ends or after {ttl:g} s: retry, or wait for it (--wait SECONDS)"
                )
            time.sleep(_POLL_S)
        try:
            yield holder
        finally:
            self.store.release_ooda_lock(self.tenant, holder)


class Policy:
    """The act stage of one cycle: reconcile re-enables by hand, then disable tools that
    fail by the policy's thresholds (protected categories are held, not acted on)."""

    def __init__(
        self, optimizer: Optimizer, scan: CallLogScan, start: float, end: float,
        cycle_id: int | None,
    ) -> None:  # fmt: skip
        self.o = optimizer
        self.scan, self.start, self.end, self.cycle_id = scan, start, end, cycle_id
        settings = optimizer.settings
        self.rate = settings.ooda_disable_success_rate
        self.min_calls = settings.ooda_disable_min_calls
        self.protected = set(settings.ooda_protected_categories)

    def apply(self, dry_run: bool) -> tuple[list[Act], list[Held]]:
        store, tenant = self.o.store, self.o.tenant
        by_id = {t.id: t for t in self.scan.tools}
        acts: list[Act] = []
        overrides = store.overrides(tenant)
        for active in store.list_acts(tenant, active_disables=True):
            tool = by_id.get(active["tool_id"])
            if tool is None or not tool.enabled:
                continue  # removed since, or still disabled: nothing to reconcile
            when = max(tool.updated_at, active["created_at"])
            overrides[tool.id] = max(overrides.get(tool.id, 0.0), when)
            row = _act_row(
                tenant, tool.id, tool.name, "enable", "manual_enable", "person",
                f"re-enabled outside OODA after act {active['id']}",
                {"reverses_act": active["id"]}, reverses=active["id"], created_at=when,
            )  # fmt: skip
            acts.append(self._record(row, disable=False, dry_run=dry_run))
        held: list[Held] = []
        for tool in sorted(self.scan.tools, key=lambda t: t.name):
            decision = self._judge(tool, overrides.get(tool.id))
            if isinstance(decision, Held):
                held.append(decision)
            elif decision is not None:
                act = self._record(decision, disable=True, dry_run=dry_run)
                if act.id is not None or dry_run:
                    acts.append(act)
        return acts, held

    def _judge(self, tool: ToolScan, override: float | None) -> Held | dict[str, Any] | None:
        """A disable act's row, a Held, or None (nothing to do) for one tool."""
        if not tool.enabled:
            return None
        since, calls, successes = self.start, tool.now.calls, tool.now.successes
        overridden = False
        if override is not None and override > self.start:
            # A person re-enabled it: only the calls made since count.
            since, overridden = override, True
            calls, successes = self.o.store.window_counts(self.o.tenant, tool.id, since, self.end)
        if not self._fails(calls, successes):
            if overridden and self._fails(tool.now.calls, tool.now.successes):
                enough = calls > self.min_calls
                return Held(
                    tool=tool.name,
                    reason=f"re-enabled by a person at {_iso(since)}; "
                    + ("it succeeds since" if enough else f"only {calls} calls since"),
                )
            return None
        if tool.category in self.protected:
            return Held(
                tool=tool.name,
                reason=f"{successes / calls:.0%} of {calls} calls succeeded, but category "
                f"{tool.category!r} is protected",
            )
        evidence = {
            "window_start": since, "window_end": self.end, "calls": calls,
            "successes": successes, "success_rate": successes / calls,
            "policy": {"success_below": self.rate, "calls_above": self.min_calls,
                       "protected_categories": sorted(self.protected)},
        }  # fmt: skip
        reason = (
            f"{successes / calls:.0%} of {calls} calls succeeded since {_iso(since)} "
            f"(policy: disable below {self.rate:.0%} over more than {self.min_calls} calls)"
        )
        return _act_row(
            self.o.tenant, tool.id, tool.name, "disable", POLICY, "ooda", reason, evidence,
            cycle_id=self.cycle_id,
        )  # fmt: skip

    def _fails(self, calls: int, successes: int) -> bool:
        return calls > self.min_calls and successes / calls < self.rate

    def _record(self, row: dict[str, Any], *, disable: bool, dry_run: bool) -> Act:
        """Store an act: a disable (of a tool still enabled), or a record only."""
        act_id = None
        if not dry_run:
            act_id = self.o.store.apply_act(
                row,
                set_enabled=False if disable else None,
                only_if_enabled=True if disable else None,
            )
        return Act(id=act_id, tool=row["tool_name"], **_act_fields(row))


def _act_row(
    tenant: str, tool_id: int, tool_name: str, action: str, policy: str, actor: str,
    reason: str, evidence: dict[str, Any], *, cycle_id: int | None = None,
    reverses: int | None = None, created_at: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """An ``ooda_acts`` row (what ``apply_act`` stores)."""
    return {
        "tenant": tenant, "cycle_id": cycle_id, "tool_id": tool_id, "tool_name": tool_name,
        "action": action, "policy": policy, "actor": actor, "reason": reason,
        "evidence": evidence, "created_at": time.time() if created_at is None else created_at,
        "reverses": reverses,
    }  # fmt: skip


def _act_fields(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("cycle_id", "tool_id", "action", "policy", "actor", "reason", "evidence",
            "created_at", "reverses")  # fmt: skip
    return {key: row[key] for key in keys}


def _notes(scan: CallLogScan) -> list[str]:
    notes = []
    if scan.future_calls:
        notes.append(
            f"{scan.future_calls} calls are stamped in the future (latest "
            f"{_iso(scan.latest_future)}): clock skew; they are in no window"
        )
    if scan.orphan_calls:
        notes.append(
            f"{scan.orphan_calls} calls in the window belong to tools removed since: left out"
        )
    if not any(t.now.calls or t.before.calls for t in scan.tools):
        notes.append("no calls in the window: nothing to judge but unused tools")
    return notes


def _iso(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")
