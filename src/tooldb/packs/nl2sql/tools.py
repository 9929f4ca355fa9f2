"""The nl2sql pack's tools. Each reads the run's shared state (its agent's contract
gives it the keys it reads), writes its own keys, and answers with the status envelope
(``status``, ``message``, ``refinement``, ``target``, ``data``): the agent that runs it
answers with that envelope, and a ``needs_retry`` naming ``nl2sql_writer`` makes tooldb
re-run the SQL writer with the refinement (agents/protocol.py)."""

from __future__ import annotations

from typing import Any

from ...context import current_registry
from ...decorators import tool
from ...settings import default_data_dir
from ...types import LoopContext
from .. import pack_database
from .chart import chart_type, render_png, spec_for
from .schema import jsonable, read_engine, read_schema, relevant_tables
from .sqlcheck import check

#: Rows a query may return; more are cut off (and the answer says so).
ROW_CAP = 200
#: Rows shown in the answer's table.
SHOWN = 20
WRITER = "nl2sql_writer"


def _state(ctx: LoopContext | None) -> dict[str, Any]:
    return ctx.state if ctx is not None else {}


@tool(category="nl2sql")
def nl2sql_find_schema(question: str, ctx: LoopContext | None = None) -> dict[str, Any]:
    """Find the tables and columns of the pack's database that a question needs (with
    sample values and the foreign keys that join them)."""
    url = pack_database("nl2sql_find_schema")
    schema = read_schema(url)
    tables = relevant_tables(schema, question, current_registry().embedder)
    described = schema.describe(tables)
    state = _state(ctx)
    state.update(question=question, schema=described, tables=tables, dialect=schema.dialect)
    return {
        "status": "success",
        "message": f"relevant tables ({schema.dialect}): {', '.join(tables)}\n{described}",
        "data": {"tables": tables},
    }


@tool(category="nl2sql")
def nl2sql_propose_sql(sql: str, ctx: LoopContext | None = None) -> str:
    """Submit the one SELECT statement that answers the question."""
    _state(ctx)["sql"] = sql.strip()
    return "SQL recorded: it is checked and run next"


@tool(category="nl2sql")
def nl2sql_check_sql(ctx: LoopContext | None = None) -> dict[str, Any]:
    """Check the proposed SQL: one read-only SELECT, existing tables and columns, and a
    plan from the database (EXPLAIN)."""
    state = _state(ctx)
    url = pack_database("nl2sql_check_sql")
    verdict = check(str(state.get("sql") or ""), read_schema(url), url)
    state["sql_checked"] = verdict.ok
    return _envelope(verdict.status, verdict.message, verdict.refinement)


@tool(category="nl2sql")
def nl2sql_run_query(ctx: LoopContext | None = None) -> dict[str, Any]:
    """Run the checked SQL read-only (at most ROW_CAP rows) and keep the result."""
    state = _state(ctx)
    url = pack_database("nl2sql_run_query")
    sql = str(state.get("sql") or "")
    verdict = check(sql, read_schema(url), url)  # again: the state may have changed since
    if not verdict.ok:
        return _envelope(verdict.status, verdict.message, verdict.refinement)
    import sqlalchemy as sa

    try:
        with read_engine(url).connect() as conn:
            cursor = conn.exec_driver_sql(sql.strip().rstrip(";"))
            columns = list(cursor.keys())
            fetched = cursor.fetchmany(ROW_CAP + 1)
    except sa.exc.SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", exc)).splitlines()[0]
        return _envelope("needs_retry", f"the query failed: {first}", f"fix this: {first}")
    rows = [[jsonable(value) for value in row] for row in fetched[:ROW_CAP]]
    truncated = len(fetched) > ROW_CAP
    state.update(columns=columns, rows=rows, truncated=truncated)
    if not rows:
        return _envelope(
            "needs_retry",
            "the query returned no rows",
            "the query returned no rows: check each filter's values against the sample "
            "values in the schema (formats of dates and names) and the joins",
        )
    note = f" (cut at {ROW_CAP})" if truncated else ""
    return {
        "status": "success",
        "message": f"{len(rows)} row(s){note}\n{markdown_table(columns, rows)}",
        "data": {"columns": columns, "row_count": len(rows), "truncated": truncated},
    }


@tool(category="nl2sql")
def nl2sql_make_chart(ctx: LoopContext | None = None) -> dict[str, Any]:
    """Chart the query's result (type from its shape: line, bar, scatter or none),
    render it to PNG, and compose the answer: the table, the SQL and the chart."""
    state = _state(ctx)
    columns, rows = list(state.get("columns") or []), list(state.get("rows") or [])
    if not columns:
        return _envelope("error", "there is no query result to chart yet: run the SQL first")
    kind = chart_type(columns, rows)
    path = None
    if kind is not None:
        spec = spec_for(kind, columns, rows, str(state.get("question") or "result"))
        path = str(render_png(spec, default_data_dir() / "packs" / "nl2sql" / "charts"))
    state.update(chart=path, chart_type=kind)
    note = f" (first {SHOWN} of {len(rows)} rows)" if len(rows) > SHOWN else ""
    chart = f"Chart ({kind}): {path}" if path else "Chart: none (the table says it all)"
    answer = (
        f"{markdown_table(columns, rows[:SHOWN])}{note}\n\n"
        f"SQL:\n```sql\n{state.get('sql', '')}\n```\n\n{chart}"
    )
    return {"status": "success", "message": answer, "data": {"chart": path, "chart_type": kind}}


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(cell(c) for c in columns) + " |"
    rule = "|" + "|".join(" --- " for _ in columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join([head, rule, *body])


def _envelope(status: str, message: str, refinement: str | None = None) -> dict[str, Any]:
    if status == "success":
        return {"status": status, "message": message}
    target = WRITER if status == "needs_retry" else None
    return {"status": status, "message": message, "refinement": refinement, "target": target}
