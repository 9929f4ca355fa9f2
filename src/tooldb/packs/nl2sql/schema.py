"""The database an nl2sql pack serves: its schema (tables, columns, keys, a few sample
values per column), read once per URL through a read-only engine, and the tables
relevant to a question found the way tooldb selects tools: BM25 over one document per
table (its name, columns and sample values, camelCase split and stemmed) blended with
the registry's embedder, then completed with the tables that join the chosen ones
(foreign-key paths), so the SQL writer sees whole join paths.
"""

from __future__ import annotations

import math
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa

from ...embedders import Embedder
from ...errors import UsageError
from ...executors.sql_engines import create_engine, dialect_of
from ...executors.sql_plan import Access
from ...selection.lexical import BM25Index

SAMPLES = 3
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
#: Tables picked by relevance before join completion.
TOP_TABLES = 6


@dataclass
class Column:
    name: str
    type: str
    samples: list[str] = field(default_factory=list)
    #: The years a date column's values span (empty for other columns).
    years: list[int] = field(default_factory=list)


@dataclass
class Table:
    name: str
    columns: list[Column]
    #: (column, referenced table, referenced column)
    foreign_keys: list[tuple[str, str, str]]
    primary_key: list[str]

    def column(self, name: str) -> Column | None:
        wanted = name.lower()
        return next((c for c in self.columns if c.name.lower() == wanted), None)

    def document(self) -> str:
        """What selection matches a question against: names, sample words (numbers
        such as ids match any number in a question, so they are left out) and the
        years a date column spans (a question's "in 2023" finds the table)."""
        parts = [self.name]
        for column in self.columns:
            parts.append(column.name)
            parts.extend(s for s in column.samples if not _NUMBER.match(s))
            parts.extend(str(year) for year in column.years)
        return " ".join(parts)

    def describe(self) -> str:
        lines = [f"table {self.name}"]
        for column in self.columns:
            mark = " primary key" if column.name in self.primary_key else ""
            refs = [f"{t}.{c}" for col, t, c in self.foreign_keys if col == column.name]
            ref = f" references {refs[0]}" if refs else ""
            shown = ", ".join(repr(s) for s in column.samples)
            samples = f" e.g. {shown}" if shown else ""
            lines.append(f"  {column.name} {column.type}{mark}{ref}{samples}")
        return "\n".join(lines)


@dataclass
class Schema:
    dialect: str
    tables: dict[str, Table]
    _vectors: dict[str, Any] = field(default_factory=dict, repr=False)

    def table(self, name: str) -> Table | None:
        wanted = name.lower()
        return next((t for key, t in self.tables.items() if key.lower() == wanted), None)

    def describe(self, names: list[str]) -> str:
        return "\n".join(self.tables[name].describe() for name in names if name in self.tables)

    def document_vectors(self, embedder: Embedder) -> Any:
        """The tables' documents embedded once per embedder (normalised rows, in table
        order): a question then costs one embedding, not one per table."""
        key = f"{type(embedder).__module__}.{type(embedder).__name__}:{id(embedder)}"
        found = self._vectors.get(key)
        if found is None:
            texts = [table.document() for table in self.tables.values()]
            found = np.asarray(embedder.embed(texts), dtype=np.float64)
            norms = np.linalg.norm(found, axis=1, keepdims=True)
            found = found / np.where(norms == 0, 1.0, norms)
            self._vectors[key] = found
        return found


_SCHEMAS: dict[str, Schema] = {}
_ENGINES: dict[str, sa.Engine] = {}
_LOCK = threading.Lock()


def read_engine(url: str) -> sa.Engine:
    """The pack's read-only engine for ``url`` (SQLite ``query_only``, PostgreSQL
    ``BEGIN READ ONLY``: executors/sql_engines.py), one per URL."""
    with _LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            engine = create_engine("nl2sql", url, Access.READ, busy_timeout_s=5.0)
            _ENGINES[url] = engine
        return engine


def read_schema(url: str) -> Schema:
    """The schema of the database at ``url`` (cached per URL for the process)."""
    with _LOCK:
        cached = _SCHEMAS.get(url)
    if cached is not None:
        return cached
    dialect = dialect_of("nl2sql", url)
    engine = read_engine(url)
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            names = inspector.get_table_names()
            tables = {name: _table(conn, inspector, name) for name in names}
    except sa.exc.SQLAlchemyError as exc:
        raise UsageError(f"cannot read the schema of {url}: {str(exc).splitlines()[0]}") from None
    if not tables:
        raise UsageError(f"the database {url} has no tables")
    schema = Schema(dialect, tables)
    with _LOCK:
        _SCHEMAS[url] = schema
    return schema


def _table(conn: sa.Connection, inspector: Any, name: str) -> Table:
    quote = conn.dialect.identifier_preparer.quote
    columns = []
    for info in inspector.get_columns(name):
        column = Column(info["name"], str(info["type"]))
        query = (
            f"SELECT DISTINCT {quote(column.name)} FROM {quote(name)} "
            f"WHERE {quote(column.name)} IS NOT NULL LIMIT {SAMPLES}"
        )
        try:
            rows = conn.execute(sa.text(query)).fetchall()
        except sa.exc.SQLAlchemyError:
            rows = []
        column.samples = [str(row[0])[:40] for row in rows]
        if column.samples and all(_DATE.match(v) for v in column.samples):
            column.years = _years(conn, quote(name), quote(column.name))
        columns.append(column)
    keys = [
        (local, fk["referred_table"], remote)
        for fk in inspector.get_foreign_keys(name)
        for local, remote in zip(fk["constrained_columns"], fk["referred_columns"], strict=False)
    ]
    primary = inspector.get_pk_constraint(name).get("constrained_columns") or []
    return Table(name, columns, keys, list(primary))


def _years(conn: sa.Connection, table: str, column: str) -> list[int]:
    try:
        low, high = conn.execute(sa.text(f"SELECT MIN({column}), MAX({column}) FROM {table}")).one()
        first, last = int(str(low)[:4]), int(str(high)[:4])
    except (sa.exc.SQLAlchemyError, ValueError, TypeError):
        return []
    return list(range(first, last + 1)) if 0 <= last - first <= 200 else []


def relevant_tables(
    schema: Schema, question: str, embedder: Embedder | None, k: int = TOP_TABLES
) -> list[str]:
    """The tables a question needs: the ``k`` best by BM25 + dense similarity, and the
    tables on the foreign-key paths between them."""
    names = list(schema.tables)
    lexical = BM25Index()
    for slot, name in enumerate(names):
        lexical.add(slot, schema.tables[name].document())
    lexical.settle()
    scores = np.asarray(lexical.scores(question, len(names)), dtype=np.float64)
    if scores.max(initial=0.0) > 0:
        scores = scores / scores.max()
    if embedder is not None:
        documents = schema.document_vectors(embedder)
        query = np.asarray(embedder.embed([question]), dtype=np.float64)[0]
        cosine = documents @ query / (np.linalg.norm(query) or 1.0)
        spread = cosine.max() - cosine.min()
        dense = (cosine - cosine.min()) / spread if spread > 0 else np.zeros_like(cosine)
        scores = 0.5 * scores + 0.5 * dense
    order = sorted(range(len(names)), key=lambda i: (-scores[i], names[i]))
    chosen = [names[i] for i in order[:k] if scores[i] > 0 or k >= len(names)]
    return _joined(schema, chosen or [names[order[0]]])


def _joined(schema: Schema, chosen: list[str]) -> list[str]:
    """``chosen`` plus the tables on the shortest foreign-key paths linking them."""
    graph: dict[str, set[str]] = {name: set() for name in schema.tables}
    for name, table in schema.tables.items():
        for _, other, _ in table.foreign_keys:
            if other in graph:
                graph[name].add(other)
                graph[other].add(name)
    result = list(dict.fromkeys(chosen))
    for start in chosen[1:]:
        path = _path(graph, chosen[0], start)
        for name in path or []:
            if name not in result:
                result.append(name)
    return result


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            step: str | None = node
            while step is not None:
                path.append(step)
                step = previous[step]
            return path[::-1]
        for other in sorted(graph[node]):
            if other not in previous:
                previous[other] = node
                queue.append(other)
    return None


def jsonable(value: Any) -> Any:
    """A database value as JSON (numbers and text as they are, the rest as text)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    try:
        number = float(value)  # Decimal
    except (TypeError, ValueError):
        return str(value)
    return int(number) if number.is_integer() and "." not in str(value) else number
