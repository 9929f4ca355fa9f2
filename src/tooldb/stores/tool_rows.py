"""Rows of ``tools`` and ``calls`` as records, and the tool-head read of the call path.

Shared by the store's reads and writes; kept apart so ``sql_store.py`` holds the
transactions, this the shapes.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import PoolProxiedConnection

from ..types import STORED, CallRecord, ErrorKind, ToolRecord

SPEC_COLUMNS = (
    "description", "category", "kind", "target", "parameters", "returns", "timeout_s", "metadata",
)  # fmt: skip


def tool_record(row: sa.Row[Any] | dict[str, Any]) -> ToolRecord:
    """A ToolRecord from a row of ``tools`` (or a dict of its columns, JSON decoded)."""
    mapping = row if isinstance(row, dict) else row._mapping
    spec = {"name": mapping["name"], **{key: mapping[key] for key in SPEC_COLUMNS}}
    stats = {key: mapping[key] for key in STATS_COLUMNS}
    record = {key: mapping[key] for key in RECORD_COLUMNS}
    record["enabled"] = bool(record["enabled"])
    # the spec's text was checked when it was stored (ToolSpec's STORED context)
    return ToolRecord.model_validate({**record, "spec": spec, "stats": stats}, context=STORED)


STATS_COLUMNS = ("usage_count", "success_count", "total_duration_ms", "last_used")
RECORD_COLUMNS = ("id", "tenant", "version", "content_hash", "enabled", "created_at", "updated_at")
#: The columns ``tool_record`` reads, for the raw read of ``get_tools``.
RECORD_READ = ("name", *SPEC_COLUMNS, *RECORD_COLUMNS, *STATS_COLUMNS)
JSON_SPEC_COLUMNS = ("parameters", "metadata")


def call_record(row: sa.Row[Any]) -> CallRecord:
    return CallRecord(
        id=row.id,
        tenant=row.tenant,
        tool_id=row.tool_id,
        tool_name=row.tool_name,
        tool_version=row.tool_version,
        run_id=row.run_id,
        session_id=row.session_id,
        arguments=row.arguments,
        success=bool(row.success),
        error_kind=ErrorKind(row.error_kind) if row.error_kind else None,
        error=row.error,
        output_size=row.output_size,
        output_preview=row.output_preview,
        duration_ms=row.duration_ms,
        started_at=row.started_at,
    )


# -- the call-recording hot path: one writer per dialect ----------------------

#: Columns of a call record in statement order: the JSON arguments, then the rest as
#: they are (every column but the generated id).
TOOL_HEAD_SQL = {
    dialect: "SELECT id, version, content_hash, enabled FROM tools"
    f" WHERE tenant = {mark} AND name = {mark}"
    for dialect, mark in (("sqlite", "?"), ("postgresql", "%s"))
}


def read_tool_head(
    connection: PoolProxiedConnection, dialect: str, params: tuple[Any, ...]
) -> tuple[Any, ...] | None:
    """The tool head row, outside any transaction (autocommit on PostgreSQL, as in the
    call writer; SQLite connections are in autocommit mode already, see sqlite.py)."""
    driver: Any = connection.dbapi_connection
    if dialect == "sqlite":  # the connection's own cursor, closed as it is dropped
        row = driver.execute(TOOL_HEAD_SQL["sqlite"], params).fetchone()
        return tuple(row) if row is not None else None
    postgres = dialect == "postgresql"
    sql = TOOL_HEAD_SQL[dialect]
    if postgres:
        driver.autocommit = True
    try:
        cursor = driver.cursor()
        try:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        finally:
            cursor.close()
        return tuple(row) if row is not None else None
    finally:
        if postgres and not driver.closed:
            driver.autocommit = False
