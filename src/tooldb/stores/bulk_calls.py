"""Many call records at once: importing a call log, simulations, benchmarks.

The same rows ``record_call`` takes, in one transaction with the tools' counters
(summed per tool, one relative UPDATE each), so the log and the statistics agree
as they do call by call. Argument rejections are logged but not counted, as the
recorder does. SQLite gets one prepared ``executemany``; PostgreSQL a ``COPY``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from ..errors import StoreError
from .schema import calls

_COLUMNS = ("arguments", *(c.name for c in calls.columns if c.name not in {"id", "arguments"}))
_SQLITE_INSERT = (
    f"INSERT INTO calls ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
)
_SQLITE_COUNT = (
    "UPDATE tools SET usage_count = usage_count + ?, success_count = success_count + ?,"
    " total_duration_ms = total_duration_ms + ?, last_used = max(coalesce(last_used, 0), ?)"
    " WHERE id = ?"
)
_PG_COPY = f"COPY calls ({', '.join(_COLUMNS)}) FROM STDIN"
_PG_COUNT = (
    "UPDATE tools SET usage_count = usage_count + %s, success_count = success_count + %s,"
    " total_duration_ms = total_duration_ms + %s,"
    " last_used = greatest(coalesce(last_used, 0), %s) WHERE id = %s"
)


class BulkCalls:
    """Mixin for SQLStore (needs ``engine``, ``_guard``, ``dialect``)."""

    engine: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]
    dialect: str

    def record_calls(self, rows: Sequence[dict[str, Any]]) -> int:
        """Append ``rows`` (each with every column of ``calls`` but ``id``) and fold the
        counted ones into their tools' statistics, all in one transaction."""
        if not rows:
            return 0
        values = [
            (json.dumps(row["arguments"]), *(row[name] for name in _COLUMNS[1:])) for row in rows
        ]
        counters: dict[int, list[float]] = {}
        for row in rows:
            if row["tool_id"] is None or row["error_kind"] == "arguments":
                continue
            entry = counters.setdefault(row["tool_id"], [0, 0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += 1 if row["success"] else 0
            entry[2] += row["duration_ms"]
            entry[3] = max(entry[3], row["started_at"])
        updates = [(n, ok, ms, last, tool_id) for tool_id, (n, ok, ms, last) in counters.items()]
        with self._guard():
            connection = self.engine.raw_connection()
        driver: Any = connection.dbapi_connection
        try:
            cursor = driver.cursor()
            try:
                if self.dialect == "sqlite":
                    cursor.execute("BEGIN IMMEDIATE")
                    cursor.executemany(_SQLITE_INSERT, values)
                    cursor.executemany(_SQLITE_COUNT, updates)
                    cursor.execute("COMMIT")
                else:
                    with cursor.copy(_PG_COPY) as copy:
                        for value in values:
                            copy.write_row(value)
                    cursor.executemany(_PG_COUNT, updates)
                    driver.commit()
            finally:
                cursor.close()
        except Exception as exc:
            connection.rollback()
            if isinstance(exc, self.engine.dialect.loaded_dbapi.Error):
                where = self.engine.url.render_as_string(hide_password=True)
                raise StoreError(f"store {where} failed to record calls: {exc}") from exc
            raise
        finally:
            connection.close()
        return len(rows)
