"""The store's evidence tables: tasks each tool served or failed (selection/evidence.py).

Every write bumps the tenant's ``evidence_state.version`` in its own transaction, so an
in-process evidence matrix can tell whether another process changed the evidence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .schema import evidence_state, task_evidence, tools


@dataclass(frozen=True)
class EvidenceRow:
    """One stored task of one tool (``vector`` None in listings)."""

    id: int
    tool: str
    task: str
    good: float
    bad: float
    created_at: float
    last_seen: float
    embedder: str
    vector: bytes | None = None


@dataclass(frozen=True)
class EvidenceWrite:
    """What one learning step writes: new rows, counts added to existing rows (merged
    near-duplicates: id, good added, bad added, seen at), rows evicted (a tool's cap)."""

    inserts: Sequence[dict[str, Any]] = ()
    merges: Sequence[tuple[int, float, float, float]] = ()
    deletes: Sequence[int] = ()


#: Plain text, cached compiled: a dialect's ``insert().on_conflict_do_nothing()`` is
#: compiled afresh on every execution (~1 ms), and both dialects take this.
_MARK = sa.text(
    "INSERT INTO run_steps (tenant, run_id, step, created_at)"
    " VALUES (:tenant, :run_id, :step, :at) ON CONFLICT DO NOTHING"
)


def _mark(conn: sa.Connection, tenant: str, run_id: str, step: str) -> bool:
    """Keep a run's step; False if it was kept already (the row waits for a concurrent
    writer of the same step to end, so one of two writers gets False)."""
    params = {"tenant": tenant, "run_id": run_id, "step": step, "at": time.time()}
    return bool(conn.execute(_MARK, params).rowcount)


def _bump(conn: sa.Connection, tenant: str) -> int:
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    table = evidence_state
    statement = (
        dialect.insert(table)
        .values(tenant=tenant, version=1)
        .on_conflict_do_update(
            index_elements=[table.c.tenant], set_={"version": table.c.version + 1}
        )
        .returning(table.c.version)
    )
    return int(conn.execute(statement).scalar_one())


def _row(row: Any, with_vector: bool) -> EvidenceRow:
    return EvidenceRow(
        id=int(row.id),
        tool=row.tool,
        task=row.task,
        good=float(row.good),
        bad=float(row.bad),
        created_at=float(row.created_at),
        last_seen=float(row.last_seen),
        embedder=row.embedder,
        vector=bytes(row.vector) if with_vector else None,
    )


class EvidenceRows:
    """Mixin for SQLStore (needs ``engine``, ``_reader``, ``_guard``)."""

    engine: sa.Engine
    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]

    def evidence_version(self, tenant: str) -> int:
        query = sa.select(evidence_state.c.version).where(evidence_state.c.tenant == tenant)
        with self._guard(), self._reader.connect() as conn:
            value = conn.execute(query).scalar()
        return int(value) if value is not None else 0

    def evidence_rows(
        self, tenant: str, embedder: str, *, vectors: bool = True
    ) -> tuple[int, list[EvidenceRow]]:
        """The tenant's evidence embedded by ``embedder`` (with vectors unless ``vectors``
        is False: what a catch-up compares with the rows it holds), and the version it is
        as of (one snapshot: a transaction)."""
        columns = [c for c in task_evidence.c if vectors or c.name != "vector"]
        query = (
            sa.select(*columns)
            .where(task_evidence.c.tenant == tenant, task_evidence.c.embedder == embedder)
            .order_by(task_evidence.c.id)
        )
        version = sa.select(evidence_state.c.version).where(evidence_state.c.tenant == tenant)
        with self._guard(), self.engine.connect() as conn, conn.begin():
            found = conn.execute(version).scalar()
            rows = [_row(row, vectors) for row in conn.execute(query)]
        return (int(found) if found is not None else 0), rows

    def evidence_vectors(self, tenant: str, ids: Sequence[int]) -> dict[int, bytes]:
        """The vectors of the given rows of the tenant (those still stored), by id."""
        table = task_evidence
        found: dict[int, bytes] = {}
        wanted = list(ids)
        with self._guard(), self._reader.connect() as conn:
            for start in range(0, len(wanted), 500):
                query = sa.select(table.c.id, table.c.vector).where(
                    table.c.tenant == tenant, table.c.id.in_(wanted[start : start + 500])
                )
                found.update((int(row.id), bytes(row.vector)) for row in conn.execute(query))
        return found

    def write_evidence(
        self, tenant: str, write: EvidenceWrite, *, once: tuple[str, str] | None = None
    ) -> tuple[int, list[int]] | None:
        """Apply one learning step in one transaction; returns the new version and the ids
        of the inserted rows (in order). ``once`` (run id, step): a submitted run's
        learning, marked in ``run_steps`` in the same transaction; None (nothing written)
        if the run has learned it already (workers/durable.py)."""
        table = task_evidence
        ids: list[int] = []
        with self._guard(), self.engine.begin() as conn:
            if once is not None and not _mark(conn, tenant, *once):
                return None
            for values in write.inserts:
                inserted = conn.execute(
                    table.insert().values(tenant=tenant, **values).returning(table.c.id)
                )
                ids.append(int(inserted.scalar_one()))
            for row_id, good, bad, seen in write.merges:
                conn.execute(
                    table.update()
                    .where(table.c.tenant == tenant, table.c.id == row_id)
                    .values(good=table.c.good + good, bad=table.c.bad + bad, last_seen=seen)
                )
            if write.deletes:
                conn.execute(
                    table.delete().where(table.c.tenant == tenant, table.c.id.in_(write.deletes))
                )
            version = _bump(conn, tenant)
        return version, ids

    def list_evidence(
        self, tenant: str, *, tool: str | None = None, limit: int = 50
    ) -> list[EvidenceRow]:
        """Newest first (by last use), without vectors."""
        columns = [c for c in task_evidence.c if c.name != "vector"]
        query = (
            sa.select(*columns)
            .where(task_evidence.c.tenant == tenant)
            .order_by(task_evidence.c.last_seen.desc(), task_evidence.c.id.desc())
            .limit(limit)
        )
        if tool is not None:
            query = query.where(task_evidence.c.tool == tool)
        with self._guard(), self._reader.connect() as conn:
            return [_row(row, False) for row in conn.execute(query)]

    def count_evidence(self, tenant: str) -> int:
        query = sa.select(sa.func.count()).where(task_evidence.c.tenant == tenant)
        with self._guard(), self._reader.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def forget_evidence(
        self, tenant: str, *, tool: str | None = None, ids: Sequence[int] | None = None
    ) -> int:
        """Delete the tenant's evidence: of one tool, the given rows, or (neither) all."""
        condition = task_evidence.c.tenant == tenant
        if tool is not None:
            condition = condition & (task_evidence.c.tool == tool)
        if ids is not None:
            condition = condition & task_evidence.c.id.in_(list(ids))
        return self._delete_evidence(tenant, condition)

    def prune_evidence(self, tenant: str, *, seen_before: float | None) -> dict[str, int]:
        """Delete stale rows (not seen since ``seen_before``), contradicted ones (failures
        at least as many as the successes they once had) and those of tools that no
        longer exist (``seen_before`` None: no row is stale). Returns how many of each
        (in that order of precedence)."""
        table = task_evidence
        tenant_rows = table.c.tenant == tenant
        stale = table.c.last_seen < seen_before if seen_before is not None else sa.false()
        contradicted = (table.c.good > 0) & (table.c.bad >= table.c.good)
        present = sa.select(tools.c.name).where(tools.c.tenant == tenant)
        orphaned = table.c.tool.not_in(present)
        counts = {}
        with self._guard(), self.engine.begin() as conn:
            for label, condition in (
                ("stale", stale),
                ("contradicted", contradicted),
                ("removed tools", orphaned),
            ):
                counts[label] = conn.execute(table.delete().where(tenant_rows, condition)).rowcount
            if any(counts.values()):
                _bump(conn, tenant)
        return counts

    def _delete_evidence(self, tenant: str, condition: sa.ColumnElement[bool]) -> int:
        with self._guard(), self.engine.begin() as conn:
            deleted = conn.execute(task_evidence.delete().where(condition)).rowcount
            if deleted:
                _bump(conn, tenant)
        return int(deleted)
