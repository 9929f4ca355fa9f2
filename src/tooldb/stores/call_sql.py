"""The prebuilt SQL that records one call (``SQLStore.record_call``): the insert into
``calls``, for a counted call the relative update of its tool's statistics and, for a
call of a submitted run, its full result kept in ``run_steps`` (workers/durable.py), in
the driver's own paramstyle, as one transaction per dialect's cheapest way.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Any

from pydantic_core import PydanticSerializationError, to_json
from sqlalchemy.pool import PoolProxiedConnection

from .schema import calls

_CALL_COLUMNS = (
    "arguments",
    *(column.name for column in calls.columns if column.name not in {"id", "arguments"}),
)
_call_values = operator.itemgetter(*_CALL_COLUMNS[1:])
#: What a counted call adds to its tool: (success 0 or 1, duration_ms, started_at, tool_id).
Stats = tuple[int, float, float, int]
#: A submitted run's call kept as a step: (tenant, run id, step, result JSON, created at).
Step = tuple[str, str, str, str, float]
CallWriter = Callable[[PoolProxiedConnection, tuple[Any, ...], Stats | None, Step | None], int]

_SQLITE_INSERT_CALL = (
    f"INSERT INTO calls ({', '.join(_CALL_COLUMNS)}) VALUES ({', '.join('?' * len(_CALL_COLUMNS))})"
)
_SQLITE_UPDATE_STATS = (
    "UPDATE tools SET usage_count = usage_count + 1, success_count = success_count + ?,"
    " total_duration_ms = total_duration_ms + ?, last_used = max(coalesce(last_used, 0), ?)"
    " WHERE id = ?"
)
_PG_INSERT_CALL = (
    f"INSERT INTO calls ({', '.join(_CALL_COLUMNS)})"
    f" VALUES (%s::json{', %s' * (len(_CALL_COLUMNS) - 1)})"
    " RETURNING id"
)
# Data-modifying CTEs run exactly once and to completion, all in the one statement.
_PG_STATS = (
    ", counted AS (UPDATE tools SET usage_count = usage_count + 1,"
    " success_count = success_count + %s, total_duration_ms = total_duration_ms + %s,"
    " last_used = greatest(coalesce(last_used, 0), %s) WHERE id = %s)"
)
# A run's step (tenant, run, step, result, created_at) with the record's id: a replayed
# execution that records the same step again (a partitioned worker) keeps the first.
_STEP_INSERT = "INSERT INTO run_steps (tenant, run_id, step, call_id, result, created_at)"
_PG_STEP = (
    f", kept AS ({_STEP_INSERT} SELECT %s, %s, %s, id, %s, %s FROM recorded ON CONFLICT DO NOTHING)"
)
#: (with stats, with a step) -> the one statement.
_PG_RECORD = {
    (stats, step): f"WITH recorded AS ({_PG_INSERT_CALL}){_PG_STATS if stats else ''}"
    f"{_PG_STEP if step else ''} SELECT id FROM recorded"
    for stats in (False, True)
    for step in (False, True)
}
_SQLITE_INSERT_STEP = f"{_STEP_INSERT} VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"


def call_params(row: dict[str, Any], counted: bool) -> tuple[tuple[Any, ...], Stats | None]:
    """The insert's parameters (arguments as JSON text) and, for a counted call of a
    registered tool, what it adds to the tool's figures."""
    values = (json_text(row["arguments"]), *_call_values(row))
    tool_id = row["tool_id"]
    if not counted or tool_id is None:
        return values, None
    return values, (1 if row["success"] else 0, row["duration_ms"], row["started_at"], tool_id)


def json_text(value: Any) -> str:
    """JSON text of a JSON-able value: pydantic-core's encoder (compact, UTF-8), several
    times faster than ``json.dumps`` on the small values of every call; NaN and infinities
    as ``json.dumps`` writes them. A string holding a lone surrogate, which UTF-8 cannot
    carry, takes ``json.dumps`` and its escapes."""
    try:
        return to_json(value, inf_nan_mode="constants").decode()
    except PydanticSerializationError:
        return json.dumps(value)


def insert_call(
    cursor: Any,
    dialect: str,
    values: tuple[Any, ...],
    stats: Stats | None,
    step: Step | None = None,
) -> int:
    """Record one call with the writer's cursor, inside the writer's transaction."""
    if dialect == "sqlite":
        cursor.execute(_SQLITE_INSERT_CALL, values)
        call_id: int = cursor.lastrowid
        if stats is not None:
            cursor.execute(_SQLITE_UPDATE_STATS, stats)
        if step is not None:
            tenant, run_id, key, result, created_at = step
            cursor.execute(_SQLITE_INSERT_STEP, (tenant, run_id, key, call_id, result, created_at))
        return call_id
    params = values + (stats or ()) + (step or ())
    cursor.execute(_PG_RECORD[stats is not None, step is not None], params)
    return int(cursor.fetchone()[0])


def _write_call_sqlite(
    connection: PoolProxiedConnection,
    values: tuple[Any, ...],
    stats: Stats | None,
    step: Step | None = None,
) -> int:
    """Insert and update inside ``BEGIN IMMEDIATE`` (the write lock up front, as in
    sqlite.py), committed before returning."""
    ids: list[int] = []
    _transaction_sqlite(
        connection, lambda cursor: ids.append(insert_call(cursor, "sqlite", values, stats, step))
    )
    return ids[0]


def _write_call_postgres(
    connection: PoolProxiedConnection,
    values: tuple[Any, ...],
    stats: Stats | None,
    step: Step | None = None,
) -> int:
    """One statement in autocommit mode: atomic on its own, and one round trip instead
    of four (BEGIN, INSERT, UPDATE, COMMIT). The pooled connection goes back to
    transactional mode afterwards, as SQLAlchemy's own pre-ping does."""
    driver: Any = connection.dbapi_connection
    driver.autocommit = True
    try:
        with driver.cursor() as cursor:
            return insert_call(cursor, "postgresql", values, stats, step)
    finally:
        if not driver.closed:
            driver.autocommit = False


#: Statements for one transaction, given its cursor.
Writes = Callable[[Any], object]


def _transaction_sqlite(connection: PoolProxiedConnection, write: Writes) -> None:
    """``write`` inside ``BEGIN IMMEDIATE``, committed before returning."""
    cursor = connection.cursor()
    try:
        cursor.execute("BEGIN IMMEDIATE")
        try:
            write(cursor)
            cursor.execute("COMMIT")
        except BaseException:
            connection.rollback()
            raise
    finally:
        cursor.close()


def _transaction_postgres(connection: PoolProxiedConnection, write: Writes) -> None:
    driver: Any = connection.dbapi_connection
    try:
        with driver.cursor() as cursor:
            write(cursor)
        driver.commit()
    except BaseException:
        if not driver.closed:
            driver.rollback()
        raise


#: One transaction of several writes (a group of an agent run's records), per dialect.
TRANSACTIONS: dict[str, Callable[[PoolProxiedConnection, Writes], None]] = {
    "sqlite": _transaction_sqlite,
    "postgresql": _transaction_postgres,
}

CALL_WRITERS: dict[str, CallWriter] = {
    "sqlite": _write_call_sqlite,
    "postgresql": _write_call_postgres,
}
