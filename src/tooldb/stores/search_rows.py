"""The store's selection tables: search documents, embeddings, decisions, change tracking.

An in-process index mirrors a tenant's tools; to stay current cheaply it reads one
row (``tenant_state``) per selection and reloads only tools whose ``change_seq`` is
past the generation it last saw. Every write that changes what selection sees
(definition, enabled flag, embedding, removal) bumps the generation in its own
transaction, so the mirror can never miss a change that committed.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

import pydantic_core
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .prebuilt import Prebuilt
from .schema import decisions, tenant_state, tool_search, tools
from .storable import storable_value

#: How much of a tool's description a selection index keeps (what Candidates show).
DESCRIPTION_CHARS = 500


class TenantState(NamedTuple):
    """A tenant's change counters: any change bumps ``generation``; removals also ``removals``.
    Read on every ``select``: a named tuple is the cheapest record to make and compare."""

    generation: int
    removals: int


@dataclass(frozen=True)
class IndexRow:
    """What an in-process index keeps of one tool."""

    id: int
    name: str
    category: str
    kind: str
    enabled: bool
    text: str
    embedder: str | None
    vector: bytes | None
    change_seq: int
    description: str = ""


class LiveStats(NamedTuple):
    """A tool's statistics as of now (they change on every call, without a generation).
    A named tuple: every selection makes one per pooled tool."""

    usage_count: int
    success_count: int
    total_duration_ms: float


#: A LiveStats from a row's (int, int, float) as the driver returns them: the named
#: tuple's own constructor is a Python function, ~0.3 µs per pooled tool.
_live = tuple.__new__

_WINDOW_COLUMNS = {
    "usage_count": ("window_calls", "base_usage_count"),
    "success_count": ("window_successes", "base_success_count"),
    "total_duration_ms": ("window_duration_ms", "base_duration_ms"),
}


def _windowed(counter: str) -> sa.ColumnElement[Any]:
    window, base = (tools.c[name] for name in _WINDOW_COLUMNS[counter])
    lifetime = tools.c[counter]
    windowed = window + lifetime - base
    return sa.case((tools.c.analyzed_at.is_(None), lifetime), else_=windowed)


def search_statements(dialect: sa.Dialect) -> dict[str, Prebuilt]:
    """The statements every ``select`` runs, compiled once for ``dialect``: the tenant's
    generation, the candidates' live statistics (all, or the called ones), the decision's
    insert."""
    id_match: sa.ColumnElement[bool]
    tenant_match: sa.ColumnElement[bool] = tools.c.tenant == sa.bindparam("tenant")
    if dialect.name == "sqlite":  # ids as one JSON array parameter, whatever their number
        ids: sa.Select[Any] = sa.select(sa.literal_column("value")).select_from(
            sa.func.json_each(sa.bindparam("ids"))
        )
        id_match = tools.c.id.in_(ids.scalar_subquery())
        # ``+tools.tenant``: SQLite's planner would otherwise walk the tenant's index
        # over every tool of the tenant (1,000 tools: 450 µs) instead of looking the
        # pool's ids up by rowid (150 µs); the unary plus keeps that index out
        tenant_match = sa.literal_column("+tools.tenant") == sa.bindparam("tenant")
    else:
        id_match = tools.c.id == sa.func.any(sa.bindparam("ids"))
        # The same on PostgreSQL: with a tenant's rows estimated few (a table that grew
        # since its last ANALYZE, or one tenant among many), the planner ANDed a bitmap
        # of the tenant's whole index with the ids' (100,000 tools: 4 ms instead of
        # 0.2); an expression keeps that index out, the ids go by primary key
        tenant_match = sa.literal_column("(tools.tenant || '')") == sa.bindparam("tenant")
    live = sa.select(
        tools.c.id,
        *(_windowed(name).label(name) for name in _WINDOW_COLUMNS),
    ).where(tenant_match, id_match)
    # A tool with neither calls nor successes scores as a new tool: not worth a row.
    # Such a tool has no call counted (its window's figures come from counted calls, and
    # successes are calls): the first term is ``ix_tools_called``'s, so the lookups go
    # through that index of the called tools only.
    zero: sa.ColumnElement[Any] = sa.literal_column("0")
    active = live.where(
        tools.c.usage_count != zero,
        sa.or_(_windowed("usage_count") != zero, _windowed("success_count") != zero),
    )
    # The same rows after the tenant's state (id -1: tool ids start at 1), one snapshot.
    state_row = sa.select(
        sa.literal_column("-1"),
        tenant_state.c.generation,
        tenant_state.c.removals,
        sa.literal_column("0.0"),
    ).where(tenant_state.c.tenant == sa.bindparam("tenant"))
    pool = sa.union_all(state_row, active)
    state = sa.select(tenant_state.c.generation, tenant_state.c.removals).where(
        tenant_state.c.tenant == sa.bindparam("tenant")
    )
    values: dict[str, Any] = {}
    for column in decisions.columns:
        if column.name == "id":
            continue
        bind: sa.BindParameter[Any] = sa.bindparam(column.name)
        is_json = column.name in _DECISION_JSON
        values[column.name] = (
            sa.cast(bind, postgresql.JSONB) if is_json and dialect.name != "sqlite" else bind
        )
    insert = decisions.insert().values(values)
    if dialect.name != "sqlite":
        insert = insert.returning(decisions.c.id)
    called = {"tools": "ix_tools_called"} if dialect.name == "sqlite" else {}
    return {
        "live_stats": Prebuilt(live, dialect),
        # SQLite's planner, without ANALYZE figures, looks every id up in the tools table
        "active_stats": Prebuilt(active, dialect, indexed_by=called),
        "pool_stats": Prebuilt(pool, dialect, indexed_by=called),
        "tenant_state": Prebuilt(state, dialect),
        "record_decision": Prebuilt(insert, dialect),
    }


_DECISION_JSON = ("filters", "candidates")
_DECISION_COLUMNS = tuple(column.name for column in decisions.columns if column.name != "id")


def decision_values(row: dict[str, Any]) -> dict[str, Any]:
    """The decision insert's parameters: its JSON columns as text. They may hold pydantic
    models (the candidates): one compact encoding pass instead of a dict per candidate
    and ``json.dumps`` (~40 µs for 8 of them)."""
    values = {name: row.get(name) for name in _DECISION_COLUMNS}
    for name in _DECISION_JSON:
        values[name] = _json_text(values[name])
    return values


def _json_text(value: Any) -> str:
    """JSON text both stores accept. A lone surrogate or a NUL (a hostile filter's name)
    cannot be stored as such: it is kept as the text of its escape, as a task is."""
    with contextlib.suppress(pydantic_core.PydanticSerializationError):  # lone surrogate
        text = pydantic_core.to_json(value).decode()
        if "\\u0000" not in text:  # PostgreSQL's JSON holds no NUL
            return text
    return pydantic_core.to_json(storable_value(pydantic_core.to_jsonable_python(value))).decode()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def bump_generation(conn: sa.Connection, tenant: str, *, removal: bool = False) -> int:
    """Advance the tenant's generation inside the caller's transaction; returns it."""
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    table = tenant_state
    statement = (
        dialect.insert(table)
        .values(tenant=tenant, generation=1, removals=1 if removal else 0)
        .on_conflict_do_update(
            index_elements=[table.c.tenant],
            set_={
                "generation": table.c.generation + 1,
                "removals": table.c.removals + (1 if removal else 0),
            },
        )
        .returning(table.c.generation)
    )
    return int(conn.execute(statement).scalar_one())


class Generation:
    """Bumps the tenant's generation at most once per transaction, on the first change."""

    def __init__(self, conn: sa.Connection, tenant: str) -> None:
        self.conn, self.tenant = conn, tenant
        self._value: int | None = None

    @property
    def value(self) -> int:
        if self._value is None:
            self._value = bump_generation(self.conn, self.tenant)
        return self._value


def upsert_document(conn: sa.Connection, tool_id: int, document: str) -> bool:
    """Store a tool's search text; a changed text drops its now-stale vector. True if changed."""
    digest = text_hash(document)
    current = conn.execute(
        sa.select(tool_search.c.text_hash).where(tool_search.c.tool_id == tool_id)
    ).first()
    if current is not None and current.text_hash == digest:
        return False
    values = {"text": document, "text_hash": digest, "embedder": None, "dim": None,
              "vector": None, "embedded_at": None}  # fmt: skip
    if current is None:
        conn.execute(tool_search.insert().values(tool_id=tool_id, **values))
    else:
        conn.execute(tool_search.update().where(tool_search.c.tool_id == tool_id).values(**values))
    return True


class SearchRows:
    """Mixin for SQLStore: the selection tables (needs ``engine``, ``_reader``, ``_guard``)."""

    engine: sa.Engine
    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]
    dialect: str
    _search_sql: dict[str, Prebuilt]
    _fetch_prebuilt: Callable[[Prebuilt, dict[str, Any]], list[tuple[Any, ...]]]
    _insert_prebuilt: Callable[[Prebuilt, dict[str, Any]], int]

    def tenants(self) -> list[str]:
        """Every tenant that has tools."""
        with self._guard(), self._reader.connect() as conn:
            return [row[0] for row in conn.execute(sa.select(tools.c.tenant).distinct())]

    def tenant_state(self, tenant: str) -> TenantState:
        rows = self._fetch_prebuilt(self._search_sql["tenant_state"], {"tenant": tenant})
        return TenantState(int(rows[0][0]), int(rows[0][1])) if rows else TenantState(0, 0)

    def tool_ids(self, tenant: str) -> list[int]:
        """Every tool id of the tenant: what an index needs to drop the removed ones."""
        query = sa.select(tools.c.id).where(tools.c.tenant == tenant)
        with self._guard(), self._reader.connect() as conn:
            return [int(row[0]) for row in conn.execute(query)]

    def index_rows(self, tenant: str, since: int = -1) -> Iterator[IndexRow]:
        """Tools (enabled or not) changed after generation ``since``, with text and vector."""
        query = (
            sa.select(
                tools.c.id,
                tools.c.name,
                tools.c.category,
                tools.c.kind,
                tools.c.enabled,
                tools.c.change_seq,
                tools.c.description,
                tool_search.c.text,
                tool_search.c.embedder,
                tool_search.c.vector,
            )
            .select_from(tools.outerjoin(tool_search, tool_search.c.tool_id == tools.c.id))
            .where(tools.c.tenant == tenant, tools.c.change_seq > since)
            .order_by(tools.c.id)
        )
        with self._guard(), self._reader.connect() as conn:
            for row in conn.execute(query):
                yield IndexRow(
                    id=row.id,
                    name=row.name,
                    category=row.category,
                    kind=row.kind,
                    enabled=bool(row.enabled),
                    text=row.text if row.text is not None else row.name,
                    embedder=row.embedder,
                    vector=bytes(row.vector) if row.vector is not None else None,
                    change_seq=int(row.change_seq),
                    description=row.description[:DESCRIPTION_CHARS],
                )

    def live_stats(self, tenant: str, ids: Sequence[int]) -> dict[int, LiveStats]:
        """Lifetime counters, or once OODA analysed the tool, its window's figures plus
        every call counted since the analysis (ooda/optimize.py)."""
        return self._stats("live_stats", tenant, ids)

    def active_stats(self, tenant: str, ids: Sequence[int]) -> dict[int, LiveStats]:
        """``live_stats`` of the tools among ``ids`` with calls or successes counted; any
        other scores exactly as a new tool does. What selection reads: most of a pool was
        never called, and each row returned costs ~0.7 µs, a skipped one ~0.1 µs."""
        return self._stats("active_stats", tenant, ids)

    def pool_stats(
        self, tenant: str, ids: Sequence[int]
    ) -> tuple[dict[int, LiveStats], TenantState]:
        """``active_stats`` and ``tenant_state`` read together (one statement, one snapshot):
        selection ranks a pool from its index, then checks here that the index was current
        when the statistics were read, instead of reading the state first (~10 µs less)."""
        stats = {row[0]: row for row in self._stats_rows("pool_stats", tenant, ids)}
        marker = stats.pop(-1, None)  # no row: the tenant never had a tool
        state = TenantState(int(marker[1]), int(marker[2])) if marker else TenantState(0, 0)
        return {tool_id: _live(LiveStats, row[1:]) for tool_id, row in stats.items()}, state

    def _stats(self, statement: str, tenant: str, ids: Sequence[int]) -> dict[int, LiveStats]:
        if not ids:
            return {}
        return {
            row[0]: _live(LiveStats, row[1:]) for row in self._stats_rows(statement, tenant, ids)
        }

    def _stats_rows(self, statement: str, tenant: str, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        # SQLite takes the ids as one JSON array (ints: joined, ~5 µs less than json.dumps)
        wanted: Any = f"[{','.join(map(str, ids))}]" if self.dialect == "sqlite" else list(ids)
        return self._fetch_prebuilt(self._search_sql[statement], {"tenant": tenant, "ids": wanted})

    def pending_embeddings(
        self, tenant: str, embedder: str, *, after_id: int = 0, limit: int = 256
    ) -> list[tuple[int, str]]:
        """(tool id, text) of tools with no vector from ``embedder``, by id, past ``after_id``."""
        query = (
            sa.select(tool_search.c.tool_id, tool_search.c.text)
            .join(tools, tools.c.id == tool_search.c.tool_id)
            .where(
                tools.c.tenant == tenant,
                tool_search.c.tool_id > after_id,
                sa.or_(tool_search.c.embedder.is_(None), tool_search.c.embedder != embedder),
            )
            .order_by(tool_search.c.tool_id)
            .limit(limit)
        )
        with self._guard(), self._reader.connect() as conn:
            return [(row.tool_id, row.text) for row in conn.execute(query)]

    def undocumented_tools(self, tenant: str) -> list[int]:
        """Ids of the tenant's tools with no search document: written to the ``tools``
        table by hand (plain SQL), not through ``register``; ``embed`` documents them."""
        query = (
            sa.select(tools.c.id)
            .select_from(tools.outerjoin(tool_search, tool_search.c.tool_id == tools.c.id))
            .where(tools.c.tenant == tenant, tool_search.c.tool_id.is_(None))
            .order_by(tools.c.id)
        )
        with self._guard(), self._reader.connect() as conn:
            return [int(row[0]) for row in conn.execute(query)]

    def embedding_counts(self, tenant: str) -> dict[str | None, int]:
        """How many of the tenant's tools have vectors from each embedder (None: none)."""
        query = (
            sa.select(tool_search.c.embedder, sa.func.count())
            .join(tools, tools.c.id == tool_search.c.tool_id)
            .where(tools.c.tenant == tenant)
            .group_by(tool_search.c.embedder)
        )
        with self._guard(), self._reader.connect() as conn:
            return {row[0]: int(row[1]) for row in conn.execute(query)}

    def put_embeddings(
        self, tenant: str, embedder: str, dim: int, vectors: Sequence[tuple[int, str, bytes]]
    ) -> int:
        """Store (tool id, text the vector was made from, vector) rows; a row whose text
        changed meanwhile is skipped (it will be embedded again). Returns rows stored."""
        if not vectors:
            return 0
        now = time.time()
        with self._guard(), self.engine.begin() as conn:
            # One read of the current texts (rows locked on PostgreSQL; SQLite holds the
            # write lock already) and one executemany, instead of an UPDATE per tool.
            current: dict[int, str] = {}
            ids = [tool_id for tool_id, _, _ in vectors]
            for start in range(0, len(ids), 500):
                query = (
                    sa.select(tool_search.c.tool_id, tool_search.c.text_hash)
                    .where(tool_search.c.tool_id.in_(ids[start : start + 500]))
                    .with_for_update()
                )
                current.update((int(row[0]), row[1]) for row in conn.execute(query))
            rows = [
                {"b_id": tool_id, "b_vector": vector}
                for tool_id, text, vector in vectors
                if current.get(tool_id) == text_hash(text)
            ]
            if rows:
                conn.execute(
                    tool_search.update()
                    .where(tool_search.c.tool_id == sa.bindparam("b_id"))
                    .values(
                        embedder=embedder, dim=dim, vector=sa.bindparam("b_vector"), embedded_at=now
                    ),
                    rows,
                )
                stored = [row["b_id"] for row in rows]
                generation = bump_generation(conn, tenant)
                for start in range(0, len(stored), 500):
                    conn.execute(
                        tools.update()
                        .where(
                            tools.c.tenant == tenant, tools.c.id.in_(stored[start : start + 500])
                        )
                        .values(change_seq=generation)
                    )
        return len(rows)

    def reset_documents(self, tenant: str, documents: Sequence[tuple[int, str]]) -> int:
        """Rewrite search texts (after the document recipe changed); returns how many changed."""
        changed: list[int] = []
        with self._guard(), self.engine.begin() as conn:
            for tool_id, document in documents:
                if upsert_document(conn, tool_id, document):
                    changed.append(tool_id)
            if changed:
                generation = bump_generation(conn, tenant)
                conn.execute(
                    tools.update().where(tools.c.id.in_(changed)).values(change_seq=generation)
                )
        return len(changed)

    # -- decisions -----------------------------------------------------------
    def record_decision(self, row: dict[str, Any]) -> int:
        """One per ``select``: prebuilt SQL like the call record (``decision_values``)."""
        return self._insert_prebuilt(self._search_sql["record_decision"], decision_values(row))

    def list_decisions(
        self, tenant: str, *, run_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        query = (
            sa.select(decisions)
            .where(decisions.c.tenant == tenant)
            .order_by(decisions.c.id.desc())
            .limit(limit)
        )
        if run_id is not None:
            query = query.where(decisions.c.run_id == run_id)
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def get_decision(self, tenant: str, decision_id: int) -> dict[str, Any] | None:
        query = sa.select(decisions).where(
            decisions.c.tenant == tenant, decisions.c.id == decision_id
        )
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row else None
