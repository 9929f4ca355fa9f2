"""The store's reads for provenance: a run's tree and everything that happened in it.

A trace is a handful of queries however big the run: one per level of sub-runs, then
the decisions, the calls and the OODA acts of the whole tree at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from .schema import calls, decisions, ooda_acts, runs

#: Sub-run levels a trace follows at most (a guard against a cycle in corrupt data).
MAX_DEPTH = 50
_CHUNK = 500


class ProvenanceRows:
    """Mixin of SQLStore (which provides ``_reader`` and ``_guard``)."""

    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]

    def run_tree(self, tenant: str, run_id: str) -> list[dict[str, Any]]:
        """The run and all its descendants (rows of ``runs``, root first), or [] if the
        run does not exist in this tenant."""
        found: list[dict[str, Any]] = []
        seen: set[str] = set()
        level = [run_id]
        with self._guard(), self._reader.connect() as conn:
            for depth in range(MAX_DEPTH):
                if not level:
                    break
                column = runs.c.id if depth == 0 else runs.c.parent_run_id
                rows = self._in(conn, sa.select(runs).where(runs.c.tenant == tenant), column, level)
                rows = [r for r in rows if r["id"] not in seen]
                rows.sort(key=lambda r: (r["started_at"], r["id"]))
                seen.update(r["id"] for r in rows)
                found.extend(rows)
                level = [r["id"] for r in rows]
        return found

    def run_ancestors(self, tenant: str, run_id: str) -> list[dict[str, Any]]:
        """The run's parent, grandparent ... up to the root (nearest first)."""
        chain: list[dict[str, Any]] = []
        current: str | None = run_id
        with self._guard(), self._reader.connect() as conn:
            for _ in range(MAX_DEPTH):
                row = conn.execute(
                    sa.select(runs.c.parent_run_id).where(
                        runs.c.tenant == tenant, runs.c.id == current
                    )
                ).first()
                if row is None or row[0] is None:
                    break
                parent = conn.execute(
                    sa.select(runs).where(runs.c.tenant == tenant, runs.c.id == row[0])
                ).first()
                if parent is None:
                    break
                chain.append(dict(parent._mapping))
                current = parent.id
        return chain

    def decisions_of_runs(self, tenant: str, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        query = sa.select(decisions).where(decisions.c.tenant == tenant)
        with self._guard(), self._reader.connect() as conn:
            rows = self._in(conn, query, decisions.c.run_id, run_ids)
        return sorted(rows, key=lambda r: (r["created_at"], r["id"]))

    def calls_of_runs(self, tenant: str, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        query = sa.select(calls).where(calls.c.tenant == tenant)
        with self._guard(), self._reader.connect() as conn:
            rows = self._in(conn, query, calls.c.run_id, run_ids)
        return sorted(rows, key=lambda r: (r["started_at"], r["id"]))

    def get_call(self, tenant: str, call_id: int) -> dict[str, Any] | None:
        query = sa.select(calls).where(calls.c.tenant == tenant, calls.c.id == call_id)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row else None

    def acts_on_tools(self, tenant: str, tool_names: Sequence[str]) -> list[dict[str, Any]]:
        """OODA's acts (disable, enable, undo) on these tools, oldest first."""
        query = sa.select(ooda_acts).where(ooda_acts.c.tenant == tenant)
        with self._guard(), self._reader.connect() as conn:
            rows = self._in(conn, query, ooda_acts.c.tool_name, tool_names)
        return sorted(rows, key=lambda r: (r["created_at"], r["id"]))

    @staticmethod
    def _in(
        conn: sa.Connection, query: sa.Select[Any], column: Any, values: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """Rows of ``query`` whose ``column`` is one of ``values``, in bounded chunks."""
        wanted = list(dict.fromkeys(values))
        out: list[dict[str, Any]] = []
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            out.extend(dict(row._mapping) for row in conn.execute(query.where(column.in_(chunk))))
        return out
