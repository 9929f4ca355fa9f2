"""Checking a model's SQL before it runs: sqlglot parses it, anything but one read-only
SELECT is refused, every table and column is checked against the schema, and the
database plans it (``EXPLAIN``) without running it.

A refusal (a write, several statements) is an ``error``: no rewrite of the same question
makes it safe. A statement that does not parse, names what does not exist or does not
plan is ``needs_retry`` with a refinement naming what was wrong and what exists, for
the SQL writer to use.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
import sqlglot
from sqlglot import exp

from .schema import Schema, read_engine

#: Statement kinds that change something, wherever they appear (a CTE included).
WRITES: tuple[type[exp.Expression], ...] = (
    exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Drop, exp.Create, exp.Alter,
    exp.TruncateTable, exp.Command, exp.Pragma, exp.Attach, exp.Detach, exp.Copy,
    exp.Transaction, exp.Set, exp.Use,
)  # fmt: skip


@dataclass
class Verdict:
    """``ok``; else ``status`` (``error``: refused, ``needs_retry``: fixable) and why."""

    status: str
    message: str
    refinement: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success"


def check(sql: str, schema: Schema, url: str) -> Verdict:
    """The verdict on ``sql`` for the database at ``url`` (see the module)."""
    text = sql.strip().rstrip(";").strip()
    if not text:
        return Verdict("needs_retry", "there is no SQL yet", "write one SELECT statement")
    try:
        statements = [s for s in sqlglot.parse(text, read=schema.dialect) if s is not None]
    except sqlglot.errors.ParseError as exc:
        first = str(exc).splitlines()[0]
        return Verdict("needs_retry", f"the SQL does not parse: {first}", f"fix: {first}")
    if len(statements) != 1:
        return Verdict("error", f"refused: {len(statements)} statements; only one SELECT is run")
    statement = statements[0]
    writes = [node for node in statement.walk() if isinstance(node, WRITES)]
    if writes or not isinstance(statement, exp.Select | exp.SetOperation):
        kind = type(writes[0] if writes else statement).__name__.upper()
        return Verdict(
            "error", f"refused: only a read-only SELECT is run, and this statement is a {kind}"
        )
    problem = _names_problem(statement, schema)
    if problem is not None:
        return Verdict("needs_retry", problem[0], problem[1])
    return _explained(text, schema, url)


def _names_problem(statement: exp.Expression, schema: Schema) -> tuple[str, str] | None:
    """An unknown table or column: (message, refinement naming what exists)."""
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    derived = {sub.alias_or_name.lower() for sub in statement.find_all(exp.Subquery)}
    aliases: dict[str, str | None] = {}  # alias or name -> table (None: a CTE or subquery)
    for node in statement.find_all(exp.Table):
        name = node.name
        if name.lower() in ctes:
            aliases[node.alias_or_name.lower()] = None
            continue
        known = schema.table(name)
        if known is None:
            tables = ", ".join(schema.tables)
            return (
                f"table {name!r} does not exist",
                f"use only existing tables: {tables}",
            )
        aliases[node.alias_or_name.lower()] = known.name
        aliases[known.name.lower()] = known.name
    for name in derived:
        aliases[name] = None
    outputs = {alias.alias.lower() for alias in statement.find_all(exp.Alias)}
    real = [schema.tables[t] for t in dict.fromkeys(a for a in aliases.values() if a)]
    for column in statement.find_all(exp.Column):
        name = column.name
        if not name or isinstance(column.this, exp.Star):
            continue
        qualifier = column.table.lower()
        if qualifier:
            if qualifier not in aliases:
                return (
                    f"{column.table!r} in {column.sql()!r} is not a table or alias of the query",
                    f"qualify columns only with the tables or aliases in FROM/JOIN "
                    f"({', '.join(sorted(aliases)) or 'none'})",
                )
            table_name = aliases[qualifier]
            if table_name is None:
                continue  # a CTE's or subquery's column: the database checks it (EXPLAIN)
            table = schema.tables[table_name]
            if table.column(name) is None:
                return _unknown_column(f"{table.name}.{name}", table.name, schema)
        elif name.lower() not in outputs and not any(t.column(name) for t in real):
            if any(value is None for value in aliases.values()):
                continue
            where = ", ".join(t.name for t in real) or "the query's tables"
            return _unknown_column(name, where, schema)
    return None


def _unknown_column(name: str, where: str, schema: Schema) -> tuple[str, str]:
    tables = [schema.tables[t] for t in where.split(", ") if t in schema.tables]
    listed = "; ".join(f"{t.name}: {', '.join(c.name for c in t.columns)}" for t in tables)
    holders = [
        t.name for t in schema.tables.values() if t.column(name.rpartition(".")[2]) is not None
    ]
    hint = f" ({name.rpartition('.')[2]} is in {', '.join(holders)}: join it)" if holders else ""
    return (
        f"column {name!r} does not exist in {where}",
        f"use only existing columns ({listed}){hint}",
    )


def _explained(sql: str, schema: Schema, url: str) -> Verdict:
    prefix = "EXPLAIN QUERY PLAN " if schema.dialect == "sqlite" else "EXPLAIN "
    try:
        with read_engine(url).connect() as conn:
            conn.exec_driver_sql(prefix + sql).fetchall()
    except sa.exc.SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", exc)).splitlines()[0]
        return Verdict(
            "needs_retry", f"the database cannot plan the SQL: {first}", f"fix this: {first}"
        )
    return Verdict("success", "the SQL is one read-only SELECT over existing tables and columns")
