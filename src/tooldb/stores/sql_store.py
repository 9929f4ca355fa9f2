"""The registry store on SQLAlchemy Core: one implementation for SQLite and PostgreSQL.

Every write is one transaction; statistics are updated with relative
``SET x = x + :d`` statements in the same transaction as the call record, so
figures stay exact under any number of concurrent writers.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import PoolProxiedConnection

from ..errors import StoreError, UsageError
from ..types import (
    CallRecord,
    Progress,
    ToolRecord,
    ToolSpec,
    ToolStats,
    ToolVersion,
)
from . import migrate
from .agent_rows import AgentRows
from .bulk_calls import BulkCalls
from .call_rows import CallRows
from .call_sql import CALL_WRITERS
from .evidence_rows import EvidenceRows
from .health_rows import HealthRows
from .hot_connections import HotConnections
from .ooda_rows import OodaRows
from .prebuilt import Prebuilt
from .provenance_rows import ProvenanceRows
from .schema import calls, tool_search, tool_versions, tools
from .search_rows import (
    Generation,
    SearchRows,
    bump_generation,
    search_statements,
    text_hash,
    upsert_document,
)
from .server_rows import ServerRows
from .skill_vector_rows import SkillVectorRows
from .sqlite import Checkpointer
from .tool_rows import (
    JSON_SPEC_COLUMNS,
    RECORD_READ,
    SPEC_COLUMNS,
    call_record,
    read_tool_head,
    tool_record,
)


class ToolHead(NamedTuple):
    """The few columns the call path needs to decide whether its cache is current."""

    id: int
    version: int
    content_hash: str
    enabled: bool


@dataclass(frozen=True)
class PutOutcome:
    """What registering one spec did: ``created``, ``updated`` or ``unchanged``."""

    record: ToolRecord
    status: str


class SQLStore(
    SearchRows,
    AgentRows,
    OodaRows,
    HealthRows,
    CallRows,
    BulkCalls,
    ProvenanceRows,
    ServerRows,
    EvidenceRows,
    SkillVectorRows,
):
    """Tools, versions, the call log and the selection tables in one SQL database."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        checkpointer: Checkpointer | None = None,
        record_lock: AbstractContextManager[None] | None = None,
    ) -> None:
        """``record_lock`` serialises this process's call records (sqlite.write_lock)."""
        self.engine = engine
        self._checkpointer = checkpointer
        self._record_lock = record_lock or contextlib.nullcontext()
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.dialect = engine.dialect.name
        self._dbapi = engine.dialect.loaded_dbapi
        writer = CALL_WRITERS.get(self.dialect)
        if writer is None:
            raise UsageError(f"unsupported database {self.dialect!r}: use SQLite or PostgreSQL")
        self._write_call = writer
        self._hot = HotConnections(engine, self._guard) if HotConnections.suits(engine) else None
        self._search_sql = search_statements(engine.dialect)

    @property
    def url(self) -> str:
        """The store's URL with any password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self._hot is not None:
            self._hot.close()
        self.engine.dispose()

    def _checkout(self) -> PoolProxiedConnection:
        """A DBAPI connection for prebuilt per-call SQL: this thread's own on SQLite
        (hot_connections.py), else one from the pool. Give it back with ``_checkin``."""
        if self._hot is not None:
            return self._hot.get()
        with self._guard():  # a failed checkout arrives wrapped by SQLAlchemy
            return self.engine.raw_connection()

    def _raw(self, failed: str = "failed") -> _RawConnection:
        """A DBAPI connection for prebuilt SQL (``_checkout``), given back whatever
        happens; a driver error becomes a StoreError naming the store (``failed`` says
        what the store did: "failed", "rejected a write" ...)."""
        return _RawConnection(self, failed)

    def _fetch_prebuilt(self, query: Prebuilt, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Rows of a prebuilt read, outside any transaction (autocommit on PostgreSQL)."""
        return self._fetch_sql(query.sql, query.params(values))

    def _fetch_sql(self, sql: str, params: Any) -> list[tuple[Any, ...]]:
        """Rows of a read in the driver's SQL and paramstyle (see ``_fetch_prebuilt``)."""
        with self._raw() as connection:
            driver: Any = connection.dbapi_connection
            postgres = self.dialect == "postgresql"
            if postgres:
                driver.autocommit = True
            try:
                cursor = driver.cursor()
                try:
                    cursor.execute(sql, params)
                    return [tuple(row) for row in cursor.fetchall()]
                finally:
                    cursor.close()
            finally:
                if postgres and not driver.closed:
                    driver.autocommit = False

    def _insert_prebuilt(self, query: Prebuilt, values: dict[str, Any]) -> int:
        """One committed insert; the new row's id (``RETURNING id`` on PostgreSQL)."""
        with self._raw() as connection:
            driver: Any = connection.dbapi_connection
            cursor = driver.cursor()
            try:
                if self.dialect == "sqlite":
                    cursor.execute("BEGIN IMMEDIATE")
                    try:
                        cursor.execute(query.sql, query.params(values))
                        new_id = int(cursor.lastrowid)
                        cursor.execute("COMMIT")
                    except BaseException:
                        driver.rollback()
                        raise
                    return new_id
                driver.autocommit = True
                try:
                    cursor.execute(query.sql, query.params(values))
                    return int(cursor.fetchone()[0])
                finally:
                    if not driver.closed:
                        driver.autocommit = False
            finally:
                cursor.close()

    def _checkin(self, connection: PoolProxiedConnection, error: BaseException | None) -> None:
        if self._hot is None:
            if isinstance(error, self._dbapi.Error) and self.engine.dialect.is_disconnect(
                error, connection.dbapi_connection, None
            ):
                connection.invalidate(error)
            connection.close()
        elif error is not None:
            self._hot.discard(connection)

    # -- schema ------------------------------------------------------------
    def revision(self) -> str | None:
        with self._guard():
            return migrate.current_revision(self.engine)

    def migrate(self) -> tuple[str | None, str]:
        with self._guard():
            return migrate.upgrade(self.engine)

    # -- tools -------------------------------------------------------------
    def tool_head(self, tenant: str, name: str) -> ToolHead | None:
        """Runs before every call, so like ``record_call`` it is prebuilt SQL on a pooled
        DBAPI connection (about 15 µs on SQLite instead of 160 µs through Core)."""
        with self._raw() as connection:
            row = read_tool_head(connection, self.dialect, (tenant, name))
        return ToolHead(row[0], row[1], row[2], bool(row[3])) if row is not None else None

    def tool_heads(self, tenant: str, names: Sequence[str]) -> dict[str, ToolHead]:
        """``tool_head`` of several tools in one query (the tools an agent run offers)."""
        wanted = list(dict.fromkeys(names))
        mark = "?" if self.dialect == "sqlite" else "%s"
        found: dict[str, ToolHead] = {}
        for start in range(0, len(wanted), 500):  # well under any bound-parameter limit
            chunk = wanted[start : start + 500]
            sql = (
                "SELECT name, id, version, content_hash, enabled FROM tools"
                f" WHERE tenant = {mark} AND name IN ({', '.join([mark] * len(chunk))})"
            )
            for row in self._fetch_sql(sql, (tenant, *chunk)):
                found[row[0]] = ToolHead(row[1], row[2], row[3], bool(row[4]))
        return found

    def get_tool(self, tenant: str, name: str) -> ToolRecord | None:
        query = sa.select(tools).where(tools.c.tenant == tenant, tools.c.name == name)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return tool_record(row) if row else None

    def get_tools(self, tenant: str, names: Sequence[str]) -> dict[str, ToolRecord]:
        """Several tools by name in one query (an agent run's opening toolbox); names
        that do not exist are absent from the result."""
        wanted = list(dict.fromkeys(names))
        found: dict[str, ToolRecord] = {}
        mark = "?" if self.dialect == "sqlite" else "%s"
        for start in range(0, len(wanted), 500):  # well under any bound-parameter limit
            chunk = wanted[start : start + 500]
            # the driver's SQL, not Core: Core's statement building and result processing
            # cost more than the query (an agent run's opening toolbox reads up to k tools)
            sql = (
                f"SELECT {', '.join(RECORD_READ)} FROM tools WHERE tenant = {mark}"
                f" AND name IN ({', '.join([mark] * len(chunk))})"
            )
            for row in self._fetch_sql(sql, (tenant, *chunk)):
                values = dict(zip(RECORD_READ, row, strict=True))
                for key in JSON_SPEC_COLUMNS:
                    if isinstance(values[key], str):  # SQLite keeps JSON as text
                        values[key] = json.loads(values[key])
                found[values["name"]] = tool_record(values)
        return found

    def list_tools(
        self,
        tenant: str,
        *,
        category: str | None = None,
        kind: str | None = None,
        include_disabled: bool = False,
    ) -> list[ToolRecord]:
        query = sa.select(tools).where(tools.c.tenant == tenant).order_by(tools.c.name)
        if category is not None:
            query = query.where(tools.c.category == category)
        if kind is not None:
            query = query.where(tools.c.kind == kind)
        if not include_disabled:
            query = query.where(tools.c.enabled.is_(True))
        with self._guard(), self._reader.connect() as conn:
            return [tool_record(row) for row in conn.execute(query)]

    def put_tools(
        self,
        tenant: str,
        specs: Sequence[ToolSpec],
        documents: Sequence[str] | None = None,
        *,
        progress: Progress | None = None,
    ) -> list[PutOutcome]:
        """Register or update many specs atomically: all land or none do.

        ``documents`` are the specs' search texts (default: the name); a changed text
        drops the tool's stale embedding.
        """
        texts = list(documents) if documents is not None else [spec.name for spec in specs]
        if len(texts) != len(specs):
            raise UsageError(f"{len(specs)} specs but {len(texts)} documents")
        for attempt in range(3):
            try:
                with self._guard(), self.engine.begin() as conn:
                    now = time.time()
                    generation = Generation(conn, tenant)
                    existing = self._existing_names(conn, tenant, [s.name for s in specs])
                    fresh = [
                        (i, spec, text)
                        for i, (spec, text) in enumerate(zip(specs, texts, strict=True))
                        if spec.name not in existing
                    ]
                    if len({spec.name for _, spec, _ in fresh}) != len(fresh):
                        fresh = []  # a name twice in one batch: the careful path, in order
                    out: list[PutOutcome | None] = [None] * len(specs)
                    for i, outcome in self._insert_new(
                        conn, tenant, fresh, now, generation, progress
                    ):
                        out[i] = outcome
                    for i, (spec, text) in enumerate(zip(specs, texts, strict=True)):
                        if out[i] is None:
                            out[i] = self._put_one(conn, tenant, spec, text, now, generation)
                    return [o for o in out if o is not None]
            except StoreError as exc:
                # Two writers created the same new tool at once: the loser retries.
                if not isinstance(exc.__cause__, IntegrityError) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _existing_names(conn: sa.Connection, tenant: str, names: Sequence[str]) -> set[str]:
        found: set[str] = set()
        unique = list(dict.fromkeys(names))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            query = sa.select(tools.c.name).where(tools.c.tenant == tenant, tools.c.name.in_(chunk))
            found.update(row[0] for row in conn.execute(query))
        return found

    def _insert_new(
        self,
        conn: sa.Connection,
        tenant: str,
        fresh: Sequence[tuple[int, ToolSpec, str]],
        now: float,
        generation: Generation,
        progress: Progress | None = None,
    ) -> list[tuple[int, PutOutcome]]:
        """Tools not yet in the registry, a few statements per batch instead of eight per
        tool (bulk imports of 100,000 tools): tools, versions and documents as multi-row
        inserts, then the rows read back once."""
        if not fresh:
            return []
        change_seq = generation.value
        rows = []
        definitions = []
        for _, spec, _ in fresh:
            definition = spec.definition()
            definitions.append(definition)
            rows.append({
                "tenant": tenant, "name": spec.name, "version": 1,
                "content_hash": spec.content_hash(), "enabled": True, "created_at": now,
                "updated_at": now, "change_seq": change_seq,
                **{key: definition[key] for key in SPEC_COLUMNS},
            })  # fmt: skip
        ids: list[int] = []
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            statement = tools.insert().returning(tools.c.id, sort_by_parameter_order=True)
            ids.extend(int(r[0]) for r in conn.execute(statement, chunk))
        versions = [
            {"tool_id": tool_id, "version": 1, "content_hash": row["content_hash"],
             "definition": definition, "created_at": now}
            for tool_id, row, definition in zip(ids, rows, definitions, strict=True)
        ]  # fmt: skip
        documents = [
            {"tool_id": tool_id, "text": text, "text_hash": text_hash(text), "embedder": None,
             "dim": None, "vector": None, "embedded_at": None}
            for tool_id, (_, _, text) in zip(ids, fresh, strict=True)
        ]  # fmt: skip
        for start in range(0, len(ids), 1000):
            conn.execute(tool_versions.insert(), versions[start : start + 1000])
            conn.execute(tool_search.insert(), documents[start : start + 1000])
            if progress is not None:
                progress(min(start + 1000, len(ids)), len(ids), "writing")
        # The records are what was just written: built from the validated specs, not read
        # back and validated again (a third of a bulk import's time at 100,000 tools).
        return [
            (
                index,
                PutOutcome(
                    ToolRecord.model_construct(
                        id=tool_id, tenant=tenant, spec=spec, version=1,
                        content_hash=row["content_hash"], enabled=True, created_at=now,
                        updated_at=now, stats=ToolStats(),
                    ),
                    "created",
                ),
            )
            for tool_id, row, (index, spec, _) in zip(ids, rows, fresh, strict=True)
        ]  # fmt: skip

    def _put_one(
        self,
        conn: sa.Connection,
        tenant: str,
        spec: ToolSpec,
        document: str,
        now: float,
        generation: Generation,
    ) -> PutOutcome:
        digest = spec.content_hash()
        definition = spec.definition()
        columns = {key: definition[key] for key in SPEC_COLUMNS}
        query = sa.select(tools.c.id, tools.c.version, tools.c.content_hash).where(
            tools.c.tenant == tenant, tools.c.name == spec.name
        )
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()
        current = conn.execute(query).first()
        if current is not None and current.content_hash == digest:
            status = "unchanged"
            tool_id = current.id
        elif current is None:
            status = "created"
            tool_id = conn.execute(
                tools.insert().values(
                    tenant=tenant,
                    name=spec.name,
                    version=1,
                    content_hash=digest,
                    enabled=True,
                    created_at=now,
                    updated_at=now,
                    **columns,
                )
            ).inserted_primary_key[0]  # type: ignore[index]
            self._insert_version(conn, tool_id, 1, digest, definition, now)
        else:
            status = "updated"
            tool_id = current.id
            version = current.version + 1
            conn.execute(
                tools.update()
                .where(tools.c.id == tool_id)
                .values(version=version, content_hash=digest, updated_at=now, **columns)
            )
            self._insert_version(conn, tool_id, version, digest, definition, now)
        if upsert_document(conn, tool_id, document) or status != "unchanged":
            conn.execute(
                tools.update().where(tools.c.id == tool_id).values(change_seq=generation.value)
            )
        row = conn.execute(sa.select(tools).where(tools.c.id == tool_id)).one()
        return PutOutcome(tool_record(row), status)

    @staticmethod
    def _insert_version(
        conn: sa.Connection,
        tool_id: int,
        version: int,
        digest: str,
        definition: dict[str, Any],
        now: float,
    ) -> None:
        conn.execute(
            tool_versions.insert().values(
                tool_id=tool_id,
                version=version,
                content_hash=digest,
                definition=definition,
                created_at=now,
            )
        )

    def set_enabled(self, tenant: str, name: str, enabled: bool) -> bool:
        with self._guard(), self.engine.begin() as conn:
            statement = (
                tools.update()
                .where(tools.c.tenant == tenant, tools.c.name == name)
                .values(
                    enabled=enabled,
                    updated_at=time.time(),
                    change_seq=bump_generation(conn, tenant),
                )
            )
            return conn.execute(statement).rowcount > 0

    def remove_tool(self, tenant: str, name: str) -> bool:
        """Delete a tool and its versions; its calls stay in the log."""
        with self._guard(), self.engine.begin() as conn:
            row = conn.execute(
                sa.select(tools.c.id).where(tools.c.tenant == tenant, tools.c.name == name)
            ).first()
            if row is None:
                return False
            conn.execute(tool_versions.delete().where(tool_versions.c.tool_id == row.id))
            conn.execute(tool_search.delete().where(tool_search.c.tool_id == row.id))
            conn.execute(tools.delete().where(tools.c.id == row.id))
            bump_generation(conn, tenant, removal=True)
            return True

    def tool_versions(self, tenant: str, name: str) -> list[ToolVersion]:
        query = (
            sa.select(tool_versions)
            .join(tools, tools.c.id == tool_versions.c.tool_id)
            .where(tools.c.tenant == tenant, tools.c.name == name)
            .order_by(tool_versions.c.version)
        )
        with self._guard(), self._reader.connect() as conn:
            rows = conn.execute(query).all()
        return [
            ToolVersion(
                version=row.version,
                content_hash=row.content_hash,
                spec=ToolSpec(name=name, **row.definition),
                created_at=row.created_at,
            )
            for row in rows
        ]

    # -- calls -------------------------------------------------------------
    def list_calls(
        self,
        tenant: str,
        *,
        tool_name: str | None = None,
        run_id: str | None = None,
        limit: int = 20,
    ) -> list[CallRecord]:
        query = sa.select(calls).where(calls.c.tenant == tenant).order_by(calls.c.id.desc())
        if tool_name is not None:
            query = query.where(calls.c.tool_name == tool_name)
        if run_id is not None:
            query = query.where(calls.c.run_id == run_id)
        query = query.limit(limit)
        with self._guard(), self._reader.connect() as conn:
            return [call_record(row) for row in conn.execute(query)]

    def count_calls(self, tenant: str, tool_name: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(calls).where(calls.c.tenant == tenant)
        if tool_name is not None:
            query = query.where(calls.c.tool_name == tool_name)
        with self._guard(), self._reader.connect() as conn:
            return int(conn.execute(query).scalar_one())

    # -- helpers -----------------------------------------------------------
    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn driver errors into StoreError with the store named."""
        try:
            yield
        except OperationalError as exc:
            raise StoreError(f"store {self.url} failed: {_first_line(exc)}") from exc
        except IntegrityError as exc:
            raise StoreError(f"store {self.url} rejected a write: {_first_line(exc)}") from exc


class _RawConnection:
    """``SQLStore._raw``'s context manager: a plain class, as three statements of every
    agent turn go through it."""

    __slots__ = ("_connection", "_failed", "_store")

    def __init__(self, store: SQLStore, failed: str) -> None:
        self._store = store
        self._failed = failed

    def __enter__(self) -> PoolProxiedConnection:
        self._connection = self._store._checkout()
        return self._connection

    def __exit__(self, kind: Any, exc: Any, traceback: Any) -> None:
        store = self._store
        if exc is None:
            store._checkin(self._connection, None)
            return
        store._checkin(self._connection, exc)  # e.g. interrupted mid-transaction: start afresh
        if isinstance(exc, store._dbapi.Error):
            verb = (
                "rejected a write" if isinstance(exc, store._dbapi.IntegrityError) else self._failed
            )
            raise StoreError(f"store {store.url} {verb}: {_first_line(exc)}") from exc


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", exc) or exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
