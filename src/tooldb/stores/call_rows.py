"""Recording calls (``SQLStore`` mixin): one call, or an agent run's held group of
calls, messages and decisions in one transaction. Prebuilt SQL on the hot connection
(call_sql.py), as every call and turn goes through here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .agent_rows import RunMessages, message_writer
from .call_sql import TRANSACTIONS, CallWriter, call_params, insert_call
from .prebuilt import Prebuilt
from .schema import run_steps
from .search_rows import decision_values


class CallRows:
    """Mixin for SQLStore (needs ``dialect``, ``engine``, ``_reader``, ``_raw``,
    ``_guard``, ``_record_lock``, ``_write_call`` and ``_search_sql``)."""

    dialect: str
    engine: sa.Engine
    _reader: sa.Engine
    _record_lock: AbstractContextManager[Any]
    _write_call: CallWriter
    _search_sql: dict[str, Prebuilt]
    _raw: Callable[[], AbstractContextManager[Any]]
    _guard: Callable[[], AbstractContextManager[None]]

    def record_call(
        self, row: dict[str, Any], *, counted: bool, step: tuple[str, str] | None = None
    ) -> int:
        """Append one call and, if it ran, fold it into the tool's statistics atomically.

        This runs on every call, so it skips SQLAlchemy's statement building, compiled
        cache lookups and result objects (about 1 ms a call): prebuilt SQL in the
        driver's own paramstyle on a pooled DBAPI connection, with the arguments
        serialised here as the ``JSON`` column type would. It is still one transaction,
        committed before this returns. ``row`` holds every column of ``calls`` but ``id``.
        ``step`` (key, result as JSON text): a submitted run's call, kept in ``run_steps``
        in the same transaction (workers/durable.py).
        """
        values, stats = call_params(row, counted)
        kept = None
        if step is not None:
            kept = (row["tenant"], row["run_id"], step[0], step[1], time.time())
        with self._record_lock, self._raw() as connection:
            return self._write_call(connection, values, stats, kept)

    def put_run_step(self, tenant: str, run_id: str, step: str, result: str) -> bool:
        """Keep a run's step without a call record (recording off, or a call that failed
        before it could be recorded); False if the step was kept already."""
        dialect = sqlite if self.dialect == "sqlite" else postgresql
        statement = (
            dialect.insert(run_steps)
            .values(tenant=tenant, run_id=run_id, step=step, result=result, created_at=time.time())
            .on_conflict_do_nothing()
        )
        with self._guard(), self.engine.begin() as conn:
            return bool(conn.execute(statement).rowcount)

    def run_step(self, tenant: str, run_id: str, step: str) -> tuple[int | None, str | None] | None:
        """A kept step of a run: (its call's record id, its result JSON), or None."""
        query = sa.select(run_steps.c.call_id, run_steps.c.result).where(
            run_steps.c.tenant == tenant, run_steps.c.run_id == run_id, run_steps.c.step == step
        )
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row.call_id, row.result)

    def record_group(
        self,
        calls: Sequence[tuple[dict[str, Any], bool, RunMessages | None]],
        messages: Sequence[RunMessages] = (),
        decisions: Sequence[dict[str, Any]] = (),
    ) -> tuple[list[int], list[int]]:
        """Several calls (row, counted, their turn's messages) as ``record_call`` writes
        them, more run messages and selection decisions, all in one transaction; the
        calls' and the decisions' new ids, in order. An agent run that does not wait
        between turns commits them this way (recording.py's ``HeldRecords``)."""
        dialect = self.dialect
        prepared = [
            (call_params(row, counted), message_writer(dialect, turn) if turn else None)
            for row, counted, turn in calls
        ]
        appends = [message_writer(dialect, rows) for rows in messages if rows[1]]
        decision_sql = self._search_sql["record_decision"]
        decision_params = [decision_sql.params(decision_values(row)) for row in decisions]
        call_ids: list[int] = []
        decision_ids: list[int] = []

        def write(cursor: Any) -> None:
            for (values, stats), turn_messages in prepared:
                call_ids.append(insert_call(cursor, dialect, values, stats))
                if turn_messages is not None:
                    turn_messages(cursor)
            for append in appends:
                append(cursor)
            for params in decision_params:
                cursor.execute(decision_sql.sql, params)
                new_id = cursor.lastrowid if dialect == "sqlite" else cursor.fetchone()[0]
                decision_ids.append(int(new_id))

        with self._record_lock, self._raw() as connection:
            TRANSACTIONS[dialect](connection, write)
        return call_ids, decision_ids
