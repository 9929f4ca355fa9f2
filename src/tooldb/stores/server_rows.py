"""What the HTTP server reads and writes beyond the registry's own API: its API keys
(hashed), and the dashboard's aggregates (calls per day, recent median latency, a page
of runs). Every query is bounded: by tenant, by a page of tool names, by a window or a
limit, each served by an index (migration 0010), so a page's cost does not grow with
the whole call log."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from ..types import RunRecord
from .agent_rows import _run_record
from .schema import api_keys, calls, runs

DAY_S = 86_400.0


class ServerRows:
    """Mixin for SQLStore (needs ``engine``, ``_reader``, ``_guard``)."""

    engine: sa.Engine
    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]

    # -- API keys -------------------------------------------------------------
    def create_api_key(self, row: dict[str, Any]) -> int:
        """Store a key's hash, prefix, tenant and scope; its new id."""
        with self._guard(), self.engine.begin() as conn:
            inserted = conn.execute(sa.insert(api_keys).values(**row)).inserted_primary_key
        return int(inserted[0]) if inserted else 0

    def api_key_by_hash(self, key_hash: str) -> dict[str, Any] | None:
        """The key with this hash, revoked or not (the caller checks ``revoked_at``)."""
        query = sa.select(api_keys).where(api_keys.c.key_hash == key_hash)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row else None

    def list_api_keys(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's keys, newest first, without their hashes."""
        columns = [c for c in api_keys.c if c.name != "key_hash"]
        query = (
            sa.select(*columns)
            .where(api_keys.c.tenant == tenant)
            .order_by(api_keys.c.created_at.desc(), api_keys.c.id.desc())
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def revoke_api_key(self, tenant: str, prefix: str, revoked_at: float) -> bool:
        """Revoke the tenant's live key with this prefix; False when there is none."""
        query = (
            sa.update(api_keys)
            .where(
                api_keys.c.tenant == tenant,
                api_keys.c.prefix == prefix,
                api_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=revoked_at)
        )
        with self._guard(), self.engine.begin() as conn:
            return conn.execute(query).rowcount > 0

    # -- dashboard aggregates -------------------------------------------------
    def calls_per_day(
        self, tenant: str, tool_names: Sequence[str], since: float, days: int
    ) -> dict[str, list[int]]:
        """For each named tool, its calls on each of ``days`` days from ``since``,
        oldest first: the tools table's sparklines. Counted from the index on (tenant,
        tool_name, started_at) alone, never reading the log's rows."""
        if not tool_names:
            return {}
        day = sa.cast(sa.func.floor((calls.c.started_at - since) / DAY_S), sa.Integer)
        query = (
            sa.select(calls.c.tool_name, day.label("day"), sa.func.count())
            .where(
                calls.c.tenant == tenant,
                calls.c.tool_name.in_(list(tool_names)),
                calls.c.started_at >= since,
                calls.c.started_at < since + days * DAY_S,
            )
            .group_by(calls.c.tool_name, day)
        )
        found: dict[str, list[int]] = {name: [0] * days for name in tool_names}
        with self._guard(), self._reader.connect() as conn:
            for name, index, count in conn.execute(query):
                if 0 <= index < days:
                    found[name][index] = int(count)
        return found

    def recent_p50_ms(
        self, tenant: str, tool_names: Sequence[str], last: int = 100
    ) -> dict[str, float | None]:
        """Each named tool's median duration over its ``last`` calls, None for a tool
        never called: one statement (a round trip, not one per tool), each tool's part
        an index range newest first; plain SQL, as SQLAlchemy's per-row typing cost
        more than the reads."""
        if not tool_names:
            return {}
        params: dict[str, Any] = {"t": tenant, "k": last}
        parts = []
        for i, name in enumerate(tool_names):
            params[f"n{i}"] = name
            parts.append(
                f"SELECT {i} AS i, d FROM (SELECT duration_ms AS d FROM calls"
                f" WHERE tenant = :t AND tool_name = :n{i} ORDER BY started_at DESC LIMIT :k)"
                f" AS recent_{i}"
            )
        durations: dict[int, list[float]] = {}
        with self._guard(), self._reader.connect() as conn:
            for i, duration in conn.execute(sa.text(" UNION ALL ".join(parts)), params):
                durations.setdefault(i, []).append(duration)
        return {
            name: statistics.median(durations[i]) if i in durations else None
            for i, name in enumerate(tool_names)
        }

    def runs_page(
        self,
        tenant: str,
        *,
        status: str | None = None,
        review: bool = False,
        top_level: bool = False,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        """A page of the tenant's runs, newest first: by ``status``, only those flagged
        ``requires_review`` (``review``), only runs without a parent (``top_level``)."""
        query = sa.select(runs).where(runs.c.tenant == tenant)
        if status is not None:
            query = query.where(runs.c.status == status)
        if review:
            query = query.where(runs.c.requires_review)
        if top_level:
            query = query.where(runs.c.parent_run_id.is_(None))
        query = query.order_by(runs.c.started_at.desc(), runs.c.id).limit(limit).offset(offset)
        with self._guard(), self._reader.connect() as conn:
            return [_run_record(row._mapping) for row in conn.execute(query)]
