"""The store's health figures for the ``analyze_system_state`` diagnostics tool: tools
by status, the call log per hour, error rates, slowest tools, store size. All
aggregates; none reads more than the period asked for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from .schema import calls, decisions, ooda_acts, ooda_cycles, tools


class HealthRows:
    """Mixin for SQLStore (needs ``engine``, ``_reader``, ``_guard``, ``dialect``)."""

    engine: sa.Engine
    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]
    dialect: str

    def system_state(
        self, tenant: str, since: float, until: float, *, top: int = 5
    ) -> dict[str, Any]:
        """Health of one tenant over [since, until): see tools/diagnostics.py."""
        with self._guard(), self._reader.connect() as conn:
            status = conn.execute(
                sa.select(tools.c.category, tools.c.enabled, sa.func.count())
                .where(tools.c.tenant == tenant)
                .group_by(tools.c.category, tools.c.enabled)
            ).all()
            figures = self._call_figures(conn, tenant, since, until, top)
            figures["ooda"] = _ooda_figures(conn, tenant)
            figures["store"] = self._store_size(conn, tenant)
        return {"tools": _status(status), **figures}

    def _call_figures(
        self, conn: sa.Connection, tenant: str, since: float, until: float, top: int
    ) -> dict[str, Any]:
        """The call log over the period: per hour, by error kind, failing and slowest tools."""
        period = (calls.c.tenant == tenant, calls.c.started_at >= since, calls.c.started_at < until)
        ok = sa.func.sum(sa.cast(calls.c.success, sa.Integer))
        hour = self._hour_bucket(since).label("hour")
        hourly = conn.execute(
            sa.select(hour, sa.func.count(), ok).where(*period).group_by(hour).order_by(hour)
        ).all()
        kinds = conn.execute(
            sa.select(calls.c.error_kind, sa.func.count())
            .where(*period)
            .group_by(calls.c.error_kind)
        ).all()
        per_tool = conn.execute(
            sa.select(
                calls.c.tool_name,
                sa.func.count().label("calls"),
                ok.label("successes"),
                sa.func.avg(calls.c.duration_ms).label("avg_ms"),
                sa.func.max(calls.c.duration_ms).label("max_ms"),
            )
            .where(*period)
            .group_by(calls.c.tool_name)
        ).all()
        p95: dict[str, float] = {
            row.name: float(row.window_p95_ms)
            for row in conn.execute(
                sa.select(tools.c.name, tools.c.window_p95_ms).where(
                    tools.c.tenant == tenant, tools.c.window_p95_ms.is_not(None)
                )
            )
        }
        return {
            "calls_per_hour": [
                {
                    "hour_start": since + 3600 * int(h),
                    "calls": int(n),
                    "failures": int(n) - int(s or 0),
                }
                for h, n, s in hourly
            ],
            "errors": _errors(kinds),
            "failing_tools": _failing(per_tool, top),
            "slowest_tools": _slowest(per_tool, p95, top),
        }

    def _hour_bucket(self, since: float) -> sa.ColumnElement[Any]:
        offset = (calls.c.started_at - since) / 3600.0
        if self.dialect == "postgresql":
            return sa.cast(sa.func.floor(offset), sa.BigInteger)
        return sa.cast(offset, sa.Integer)  # non-negative here: truncation is floor

    def _store_size(self, conn: sa.Connection, tenant: str) -> dict[str, Any]:
        if self.dialect == "postgresql":
            size = conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar()
        else:
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar() or 0
            page_size = conn.exec_driver_sql("PRAGMA page_size").scalar() or 0
            size = int(pages) * int(page_size)
        count = sa.func.count()
        return {
            "dialect": self.dialect,
            "size_bytes": int(size or 0),
            "tenant_calls": int(
                conn.execute(sa.select(count).where(calls.c.tenant == tenant)).scalar_one()
            ),
            "tenant_decisions": int(
                conn.execute(sa.select(count).where(decisions.c.tenant == tenant)).scalar_one()
            ),
        }


def _status(rows: Sequence[Any]) -> dict[str, Any]:
    by_category: dict[str, dict[str, int]] = {}
    for category, enabled, n in rows:
        entry = by_category.setdefault(category, {"enabled": 0, "disabled": 0})
        entry["enabled" if enabled else "disabled"] += int(n)
    enabled = sum(e["enabled"] for e in by_category.values())
    disabled = sum(e["disabled"] for e in by_category.values())
    return {
        "total": enabled + disabled,
        "enabled": enabled,
        "disabled": disabled,
        "by_category": dict(sorted(by_category.items())),
    }


def _errors(rows: Sequence[Any]) -> dict[str, Any]:
    by_kind = {kind or "none": int(n) for kind, n in rows}
    total = sum(by_kind.values())
    failed = total - by_kind.pop("none", 0)
    return {
        "calls": total,
        "failures": failed,
        "error_rate": failed / total if total else None,
        "by_kind": dict(sorted(by_kind.items())),
    }


def _failing(rows: Sequence[Any], top: int) -> list[dict[str, Any]]:
    found = [
        {
            "tool": r.tool_name,
            "calls": int(r.calls),
            "error_rate": 1 - int(r.successes or 0) / r.calls,
        }
        for r in rows
        if r.calls and int(r.successes or 0) < r.calls
    ]
    found.sort(key=lambda e: (-e["error_rate"], -e["calls"], e["tool"]))
    return found[:top]


def _slowest(rows: Sequence[Any], p95: dict[str, float], top: int) -> list[dict[str, Any]]:
    found = [
        {
            "tool": r.tool_name,
            "calls": int(r.calls),
            "avg_ms": float(r.avg_ms),
            "max_ms": float(r.max_ms),
            "window_p95_ms": p95.get(r.tool_name),
        }
        for r in rows
    ]
    found.sort(key=lambda e: (-e["avg_ms"], e["tool"]))
    return found[:top]


def _ooda_figures(conn: sa.Connection, tenant: str) -> dict[str, Any]:
    """The last OODA cycle and how many tools OODA keeps disabled."""
    last_cycle = conn.execute(
        sa.select(ooda_cycles.c.id, ooda_cycles.c.ended_at, ooda_cycles.c.acts,
                  ooda_cycles.c.findings)
        .where(ooda_cycles.c.tenant == tenant)
        .order_by(ooda_cycles.c.id.desc())
        .limit(1)
    ).first()  # fmt: skip
    disabled_by_ooda = conn.execute(
        sa.select(sa.func.count()).where(
            ooda_acts.c.tenant == tenant,
            ooda_acts.c.action == "disable",
            ooda_acts.c.undone_at.is_(None),
        )
    ).scalar_one()
    return {
        "last_cycle_id": last_cycle.id if last_cycle else None,
        "last_cycle_at": last_cycle.ended_at if last_cycle else None,
        "last_cycle_findings": len(last_cycle.findings) if last_cycle else None,
        "last_cycle_acts": last_cycle.acts if last_cycle else None,
        "tools_disabled_by_ooda": int(disabled_by_ooda),
    }
