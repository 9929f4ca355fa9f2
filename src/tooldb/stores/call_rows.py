"""Recording calls (``SQLStore`` mixin): one call, or an agent run's held group of
calls, messages and decisions in one transaction. Prebuilt SQL on the hot connection
(call_sql.py), as every call and turn goes through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from .agent_rows import RunMessages, message_writer
from .call_sql import TRANSACTIONS, CallWriter, call_params, insert_call
from .prebuilt import Prebuilt
from .search_rows import decision_values


class CallRows:
    """Mixin for SQLStore (needs ``dialect``, ``_raw``, ``_record_lock``, ``_write_call``
    and ``_search_sql``)."""

    dialect: str
    _record_lock: AbstractContextManager[Any]
    _write_call: CallWriter
    _search_sql: dict[str, Prebuilt]
    _raw: Callable[[], AbstractContextManager[Any]]

    def record_call(self, row: dict[str, Any], *, counted: bool) -> int:
        """Append one call and, if it ran, fold it into the tool's statistics atomically.

        This runs on every call, so it skips SQLAlchemy's statement building, compiled
        cache lookups and result objects (about 1 ms a call): prebuilt SQL in the
        driver's own paramstyle on a pooled DBAPI connection, with the arguments
        serialised here as the ``JSON`` column type would. It is still one transaction,
        committed before this returns. ``row`` holds every column of ``calls`` but ``id``.
        """
        values, stats = call_params(row, counted)
        with self._record_lock, self._raw() as connection:
            return self._write_call(connection, values, stats)

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
