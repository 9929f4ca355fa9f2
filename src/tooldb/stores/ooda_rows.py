"""The store's OODA reads and writes: the windowed scan of the call log, the figures and
their time series, the audited acts, cycles, and the per-tenant cycle lease.

The scan reads the tools' lifetime counters and the log's aggregates in one
snapshot (a deferred read transaction on SQLite's WAL, REPEATABLE READ on
PostgreSQL), so "window figures + (counters now - counters at the scan)", which
is what selection reads afterwards, counts every call exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..errors import UsageError
from .schema import calls, ooda_acts, ooda_cycles, ooda_locks, tool_stats_history, tools
from .search_rows import bump_generation

#: Quantiles of the current window kept on each tool (median and p95).
QUANTILES = (0.5, 0.95)


@dataclass(frozen=True)
class WindowCounts:
    """One tool's counted calls in one window, with the moments of log(1 + ms)."""

    calls: int = 0
    successes: int = 0
    duration_ms: float = 0.0
    log_sum: float = 0.0
    log_squares: float = 0.0


@dataclass(frozen=True)
class ToolScan:
    """One tool as the scan saw it: identity, lifetime counters, both windows."""

    id: int
    name: str
    category: str
    description: str
    enabled: bool
    created_at: float
    updated_at: float
    usage_count: int
    success_count: int
    total_duration_ms: float
    now: WindowCounts
    before: WindowCounts
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class CallLogScan:
    """What the scan found: every current tool, and the calls it could not use."""

    tools: list[ToolScan]
    #: Calls stamped at or after the window's end (clock skew): never in any window.
    future_calls: int
    latest_future: float | None
    #: Counted calls in the current window whose tool no longer exists.
    orphan_calls: int


class OodaRows:
    """Mixin for SQLStore (needs ``engine``, ``_reader``, ``_guard``, ``dialect``)."""

    engine: sa.Engine
    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]
    dialect: str

    # -- analyse ---------------------------------------------------------------
    def scan_call_log(self, tenant: str, start: float, middle: float, end: float) -> CallLogScan:
        """Aggregate counted calls (not argument rejections) in [start, middle) and
        [middle, end) per tool, plus the current window's quantiles, in one snapshot."""
        with self._guard(), self._snapshot() as conn:
            current = {row.id: row for row in conn.execute(_tool_snapshot(tenant))}
            windows: dict[tuple[int, int], WindowCounts] = {}
            for row in conn.execute(_window_aggregates(tenant, start, middle, end)):
                if row.tool_id is not None:
                    windows[(int(row.tool_id), int(row.w))] = WindowCounts(
                        int(row.calls), int(row.successes or 0), float(row.duration or 0.0),
                        float(row.log_sum or 0.0), float(row.log_squares or 0.0),
                    )  # fmt: skip
            quantiles = self._quantiles(conn, tenant, middle, end)
            future = conn.execute(
                sa.select(sa.func.count(), sa.func.max(calls.c.started_at)).where(
                    calls.c.tenant == tenant, calls.c.started_at >= end
                )
            ).one()
        orphans = sum(
            c.calls for (tool_id, w), c in windows.items() if w and tool_id not in current
        )
        empty = WindowCounts()
        scanned = [
            ToolScan(
                id=row.id,
                name=row.name,
                category=row.category,
                description=row.description,
                enabled=bool(row.enabled),
                created_at=row.created_at,
                updated_at=row.updated_at,
                usage_count=int(row.usage_count),
                success_count=int(row.success_count),
                total_duration_ms=float(row.total_duration_ms),
                now=windows.get((row.id, 1), empty),
                before=windows.get((row.id, 0), empty),
                p50_ms=quantiles.get(row.id, (None, None))[0],
                p95_ms=quantiles.get(row.id, (None, None))[1],
            )
            for row in current.values()
        ]
        return CallLogScan(scanned, int(future[0]), future[1], orphans)

    @contextmanager
    def _snapshot(self) -> Iterator[sa.Connection]:
        """A read-only transaction whose reads all see one instant."""
        if self.dialect == "sqlite":
            with self._reader.connect() as conn:
                conn.exec_driver_sql("BEGIN")  # deferred: a WAL read snapshot, no lock
                try:
                    yield conn
                finally:
                    conn.exec_driver_sql("COMMIT")
        else:
            reader = self.engine.execution_options(isolation_level="REPEATABLE READ")
            with reader.connect() as conn, conn.begin():
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                yield conn

    def _quantiles(
        self, conn: sa.Connection, tenant: str, middle: float, end: float
    ) -> dict[int, tuple[float | None, float | None]]:
        """Median and p95 (linear interpolation, as ``percentile_cont``) per tool over
        [middle, end). PostgreSQL computes them; SQLite has no percentile aggregate,
        so (tool, ms) rows go to numpy (bench/ooda.py compares ROW_NUMBER() windows)."""
        where = (
            calls.c.tenant == tenant,
            calls.c.started_at >= middle,
            calls.c.started_at < end,
            _counted(),
        )
        if self.dialect == "postgresql":
            query = (
                sa.select(
                    calls.c.tool_id,
                    *(
                        sa.func.percentile_cont(q).within_group(calls.c.duration_ms)
                        for q in QUANTILES
                    ),
                )
                .where(*where)
                .group_by(calls.c.tool_id)
            )
            return {
                int(row[0]): (float(row[1]), float(row[2]))
                for row in conn.execute(query)
                if row[0] is not None
            }
        # The driver's cursor, in the snapshot's transaction: SQLAlchemy rows cost 3x.
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(_SQLITE_DURATIONS, (tenant, middle, end))
            return group_quantiles(cursor.fetchall())
        finally:
            cursor.close()

    def apply_analysis(
        self,
        tenant: str,
        scan: CallLogScan,
        analyzed_at: float,
        window_s: float,
        cycle: dict[str, Any],
    ) -> int:
        """Store the figures on the tools and as history rows, and open the cycle's
        record; one transaction. Returns the cycle id."""
        figures = [
            {
                "b_id": t.id,
                "analyzed_at": analyzed_at,
                "window_s": window_s,
                "window_calls": t.now.calls,
                "window_successes": t.now.successes,
                "window_duration_ms": t.now.duration_ms,
                "window_p50_ms": t.p50_ms,
                "window_p95_ms": t.p95_ms,
                "base_usage_count": t.usage_count,
                "base_success_count": t.success_count,
                "base_duration_ms": t.total_duration_ms,
            }
            for t in scan.tools
        ]
        with self._guard(), self.engine.begin() as conn:
            cycle_id = int(
                conn.execute(
                    ooda_cycles.insert().values(tenant=tenant, **cycle)
                ).inserted_primary_key[0]  # type: ignore[index]
            )
            if figures:
                update = (
                    tools.update()
                    .where(tools.c.tenant == tenant, tools.c.id == sa.bindparam("b_id"))
                    .values({key: sa.bindparam(key) for key in figures[0] if key != "b_id"})
                )
                conn.execute(update, figures)
                conn.execute(
                    tool_stats_history.insert(),
                    [
                        {
                            "tenant": tenant,
                            "tool_id": t.id,
                            "tool_name": t.name,
                            "cycle_id": cycle_id,
                            "analyzed_at": analyzed_at,
                            "window_s": window_s,
                            "calls": t.now.calls,
                            "successes": t.now.successes,
                            "duration_ms": t.now.duration_ms,
                            "p50_ms": t.p50_ms,
                            "p95_ms": t.p95_ms,
                        }
                        for t in scan.tools
                    ],
                )
        return cycle_id

    def finish_cycle(self, tenant: str, cycle_id: int, values: dict[str, Any]) -> None:
        with self._guard(), self.engine.begin() as conn:
            conn.execute(
                ooda_cycles.update()
                .where(ooda_cycles.c.tenant == tenant, ooda_cycles.c.id == cycle_id)
                .values(**values)
            )

    def list_cycles(self, tenant: str, limit: int = 20) -> list[dict[str, Any]]:
        query = (
            sa.select(ooda_cycles)
            .where(ooda_cycles.c.tenant == tenant)
            .order_by(ooda_cycles.c.id.desc())
            .limit(limit)
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def stats_history(self, tenant: str, tool_name: str, limit: int = 50) -> list[dict[str, Any]]:
        """The windowed figures of a tool (by name, across removals) newest first."""
        query = (
            sa.select(tool_stats_history)
            .where(
                tool_stats_history.c.tenant == tenant,
                tool_stats_history.c.tool_name == tool_name,
            )
            .order_by(tool_stats_history.c.id.desc())
            .limit(limit)
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def window_counts(
        self, tenant: str, tool_id: int, since: float, until: float
    ) -> tuple[int, int]:
        """(counted calls, successes) of one tool in [since, until)."""
        query = sa.select(sa.func.count(), sa.func.sum(sa.cast(calls.c.success, sa.Integer))).where(
            calls.c.tenant == tenant,
            calls.c.tool_id == tool_id,
            calls.c.started_at >= since,
            calls.c.started_at < until,
            _counted(),
        )
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).one()
        return int(row[0]), int(row[1] or 0)

    # -- act -------------------------------------------------------------------
    def apply_act(
        self, row: dict[str, Any], *, set_enabled: bool | None, only_if_enabled: bool | None
    ) -> int | None:
        """Record an act and make its change in one transaction.

        ``set_enabled`` (None: record only) flips the tool, only if its flag is
        ``only_if_enabled`` when that is given (None returned when it was not: nothing
        done). An act that ``reverses`` another marks that one undone, and fails if
        another undo got there first.
        """
        try:
            return self._apply_act(row, set_enabled, only_if_enabled)
        except _Unchanged:
            return None

    def _apply_act(
        self, row: dict[str, Any], set_enabled: bool | None, only_if_enabled: bool | None
    ) -> int:
        tenant, tool_id = row["tenant"], row["tool_id"]
        with self._guard(), self.engine.begin() as conn:
            if set_enabled is not None:
                statement = (
                    tools.update()
                    .where(tools.c.tenant == tenant, tools.c.id == tool_id)
                    .values(
                        enabled=set_enabled,
                        updated_at=row["created_at"],
                        change_seq=bump_generation(conn, tenant),
                    )
                )
                if only_if_enabled is not None:
                    statement = statement.where(tools.c.enabled.is_(only_if_enabled))
                if conn.execute(statement).rowcount == 0:
                    raise _Unchanged  # rolls the generation bump back too
            act_id = int(conn.execute(ooda_acts.insert().values(**row)).inserted_primary_key[0])  # type: ignore[index]
            reverses = row.get("reverses")
            if reverses is not None:
                marked = conn.execute(
                    ooda_acts.update()
                    .where(
                        ooda_acts.c.tenant == tenant,
                        ooda_acts.c.id == reverses,
                        ooda_acts.c.undone_at.is_(None),
                    )
                    .values(undone_at=row["created_at"], undone_by=act_id)
                ).rowcount
                if not marked:
                    raise UsageError(f"act {reverses} was undone meanwhile")
            return act_id

    def list_acts(
        self, tenant: str, *, tool_id: int | None = None, active_disables: bool = False,
        limit: int = 50,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Acts newest first; ``active_disables``: only disables not undone (all of them)."""
        query = sa.select(ooda_acts).where(ooda_acts.c.tenant == tenant)
        if tool_id is not None:
            query = query.where(ooda_acts.c.tool_id == tool_id)
        if active_disables:
            query = query.where(ooda_acts.c.action == "disable", ooda_acts.c.undone_at.is_(None))
        else:
            query = query.limit(limit)
        with self._guard(), self._reader.connect() as conn:
            return [
                dict(row._mapping) for row in conn.execute(query.order_by(ooda_acts.c.id.desc()))
            ]

    def get_act(self, tenant: str, act_id: int) -> dict[str, Any] | None:
        query = sa.select(ooda_acts).where(ooda_acts.c.tenant == tenant, ooda_acts.c.id == act_id)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row else None

    def overrides(self, tenant: str) -> dict[int, float]:
        """Per tool, when a person last reversed an OODA disable (by undo or by hand)."""
        query = (
            sa.select(ooda_acts.c.tool_id, sa.func.max(ooda_acts.c.undone_at))
            .where(
                ooda_acts.c.tenant == tenant,
                ooda_acts.c.action == "disable",
                ooda_acts.c.undone_at.is_not(None),
            )
            .group_by(ooda_acts.c.tool_id)
        )
        with self._guard(), self._reader.connect() as conn:
            return {int(row[0]): float(row[1]) for row in conn.execute(query)}

    # -- the cycle lease ---------------------------------------------------------
    def acquire_ooda_lock(self, tenant: str, holder: str, ttl_s: float) -> tuple[bool, str, float]:
        """Take the tenant's lease unless a live one exists; (taken, holder, since)."""
        now = time.time()
        dialect = sqlite if self.dialect == "sqlite" else postgresql
        statement = (
            dialect.insert(ooda_locks)
            .values(tenant=tenant, holder=holder, acquired_at=now, expires_at=now + ttl_s)
            .on_conflict_do_update(
                index_elements=[ooda_locks.c.tenant],
                set_={"holder": holder, "acquired_at": now, "expires_at": now + ttl_s},
                where=ooda_locks.c.expires_at < now,
            )
        )
        with self._guard(), self.engine.begin() as conn:
            conn.execute(statement)
            row = conn.execute(
                sa.select(ooda_locks.c.holder, ooda_locks.c.acquired_at).where(
                    ooda_locks.c.tenant == tenant
                )
            ).one()
        return row.holder == holder, row.holder, float(row.acquired_at)

    def renew_ooda_lock(self, tenant: str, holder: str, ttl_s: float) -> bool:
        """Extend the lease; False if it expired and another holder took it."""
        with self._guard(), self.engine.begin() as conn:
            return (
                conn.execute(
                    ooda_locks.update()
                    .where(ooda_locks.c.tenant == tenant, ooda_locks.c.holder == holder)
                    .values(expires_at=time.time() + ttl_s)
                ).rowcount
                > 0
            )

    def release_ooda_lock(self, tenant: str, holder: str) -> None:
        with self._guard(), self.engine.begin() as conn:
            conn.execute(
                ooda_locks.delete().where(
                    ooda_locks.c.tenant == tenant, ooda_locks.c.holder == holder
                )
            )


_SQLITE_DURATIONS = (
    "SELECT tool_id, duration_ms FROM calls WHERE tenant = ? AND started_at >= ?"
    " AND started_at < ? AND tool_id IS NOT NULL"
    " AND (error_kind IS NULL OR error_kind != 'arguments')"
)


class _Unchanged(Exception):
    """The act's condition no longer held: roll its transaction back."""


def _counted() -> sa.ColumnElement[bool]:
    """Calls that count towards a tool's figures: all but argument rejections."""
    return sa.or_(calls.c.error_kind.is_(None), calls.c.error_kind != "arguments")


def _tool_snapshot(tenant: str) -> sa.Select[Any]:
    return sa.select(
        tools.c.id, tools.c.name, tools.c.category, tools.c.description, tools.c.enabled,
        tools.c.created_at, tools.c.updated_at, tools.c.usage_count, tools.c.success_count,
        tools.c.total_duration_ms,
    ).where(tools.c.tenant == tenant)  # fmt: skip


def _window_aggregates(tenant: str, start: float, middle: float, end: float) -> sa.Select[Any]:
    window = sa.case((calls.c.started_at >= middle, 1), else_=0)
    # A negative duration (a hostile or broken writer) counts as 0 ms, not a log error.
    log_ms = sa.func.ln(1.0 + sa.case((calls.c.duration_ms > 0, calls.c.duration_ms), else_=0.0))
    return (
        sa.select(
            calls.c.tool_id,
            window.label("w"),
            sa.func.count().label("calls"),
            sa.func.sum(sa.cast(calls.c.success, sa.Integer)).label("successes"),
            sa.func.sum(calls.c.duration_ms).label("duration"),
            sa.func.sum(log_ms).label("log_sum"),
            sa.func.sum(log_ms * log_ms).label("log_squares"),
        )
        .where(
            calls.c.tenant == tenant,
            calls.c.started_at >= start,
            calls.c.started_at < end,
            _counted(),
        )
        .group_by(calls.c.tool_id, window)
    )


def group_quantiles(
    rows: Sequence[Any], quantiles: Sequence[float] = QUANTILES
) -> dict[int, tuple[float | None, float | None]]:
    """Per-group quantiles of (group id, value) rows, interpolated linearly between
    order statistics exactly as PostgreSQL's ``percentile_cont``."""
    if not rows:
        return {}
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=2 * len(rows))
    ids, values = flat[0::2].astype(np.int64), flat[1::2]
    order = np.lexsort((values, ids))
    ids, values = ids[order], values[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, len(ids)])
    found = []
    for q in quantiles:
        position = q * (sizes - 1)
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, sizes - 1)
        fraction = position - low
        below, above = values[starts + low], values[starts + high]
        found.append(below + fraction * (above - below))
    return {
        int(tool_id): (float(found[0][i]), float(found[1][i]))
        for i, tool_id in enumerate(ids[starts])
    }
