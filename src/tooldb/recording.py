"""Recording: every call goes into the log before ``call`` returns.

The insert and the statistics update share one committed transaction, so a
process killed right after ``call`` returns has lost nothing, and concurrent
writers keep the figures exact. Calls rejected at binding are logged too
(``error_kind = arguments``) but do not count against the tool's success rate:
a caller's bad arguments are not the tool failing.

An agent run writes each call's record with its turn's messages through
``HeldRecords``: by default (``agent_held_calls = 1``) committed before the result
goes back to the model. Opting into group commit (``agent_held_calls = N``) holds
the records of turns that follow each other without waiting (a scripted or cached
model, quick synchronous tools) and commits them together, as soon as the run is
about to wait on anything, every N calls, and when it ends: one commit per group of
turns instead of one per turn, at the price of what a killed process loses (the
held calls). See docs/agents.md.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_core import to_jsonable_python

from .execution import Outcome
from .settings import Settings
from .stores import RunMessages, Store
from .stores.call_sql import json_text
from .stores.storable import storable_arguments, storable_text
from .types import ErrorKind, Selection, ToolRecord, ToolResult


class Recorder:
    """Writes call records for one registry session."""

    def __init__(self, store: Store, settings: Settings, tenant: str) -> None:
        self.store = store
        self.tenant = tenant
        self.enabled = settings.record_calls
        self.preview_chars = settings.record_output_chars
        self.session_id = uuid.uuid4().hex

    def record(
        self,
        tool: ToolRecord,
        arguments: Any,
        outcome: Outcome,
        *,
        run_id: str | None = None,
        step: str | None = None,
    ) -> int | None:
        """Log one call; returns its id (None when recording is off). ``step``: the key
        under which a submitted run keeps the call's full result, in the record's
        transaction (workers/durable.py); kept even when recording is off."""
        kept = (step, step_result(outcome)) if step is not None and run_id else None
        if not self.enabled:
            if kept is not None and run_id:
                self.store.put_run_step(self.tenant, run_id, *kept)
            return None
        counted = outcome.error_kind is not ErrorKind.ARGUMENTS
        row = self.row(tool, arguments, outcome, run_id)
        return self.store.record_call(row, counted=counted, step=kept)

    def row(
        self, tool: ToolRecord, arguments: Any, outcome: Outcome, run_id: str | None
    ) -> dict[str, Any]:
        """The ``calls`` row of one call (every column but ``id``)."""
        result = outcome.result
        output = result.output or ""
        if outcome.error_kind is ErrorKind.ARGUMENTS:  # as given: anything at all
            stored = storable_arguments(arguments)
            arguments = stored if isinstance(stored, dict) or stored is None else {"_raw": stored}
        else:
            arguments = _jsonable_arguments(arguments)
        return {
            "tenant": self.tenant,
            "tool_id": tool.id,
            "tool_name": tool.name,
            "tool_version": tool.version,
            "run_id": run_id,
            "session_id": self.session_id,
            "arguments": arguments,
            "success": result.success,
            "error_kind": outcome.error_kind.value if outcome.error_kind else None,
            "error": storable_text(_capped(result.error, self.preview_chars)),
            "output_size": len(output.encode("utf-8", "surrogatepass")),
            "output_preview": storable_text(output[: self.preview_chars]) if output else None,
            "duration_ms": result.duration_ms,
            "started_at": outcome.started_at,
        }


#: The default of ``Settings.agent_held_calls``: every call committed at once.
HELD_MAX = 1


class HeldRecords:
    """What an agent run has not committed yet: call records (each with its turn's
    messages), other run messages and selection decisions.

    ``hold`` keeps a call (its ToolResult gets its ``call_id`` at the commit),
    ``hold_messages`` a run's messages, ``hold_decision`` a selection's decision (its
    ``decision_id`` comes at the commit); ``commit`` writes them all in one transaction.
    The run commits whenever it is about to wait, so only what happens without any
    wait in between is grouped.
    """

    __slots__ = (
        "_calls", "_decisions", "_messages", "_recorder", "_results", "_selections", "limit",
    )  # fmt: skip

    def __init__(self, recorder: Recorder, limit: int = HELD_MAX) -> None:
        self._recorder = recorder
        #: Calls held before a commit is forced (1: every call is committed at once).
        self.limit = max(1, limit)
        self._calls: list[tuple[dict[str, Any], bool, RunMessages | None]] = []
        self._results: list[ToolResult] = []
        self._messages: list[RunMessages] = []
        self._decisions: list[dict[str, Any]] = []
        self._selections: list[Selection] = []

    def __len__(self) -> int:
        return len(self._calls) + len(self._messages) + len(self._decisions)

    def hold(
        self,
        tool: ToolRecord,
        arguments: Any,
        outcome: Outcome,
        run_id: str | None,
        messages: RunMessages | None,
    ) -> None:
        counted = outcome.error_kind is not ErrorKind.ARGUMENTS
        self._calls.append(
            (self._recorder.row(tool, arguments, outcome, run_id), counted, messages)
        )
        self._results.append(outcome.result)
        if len(self._calls) >= self.limit:
            self.commit()

    def hold_messages(self, messages: RunMessages) -> None:
        self._messages.append(messages)

    def hold_decision(self, row: dict[str, Any], selection: Selection) -> None:
        self._decisions.append(row)
        self._selections.append(selection)

    def commit(self) -> None:
        """Write what is held, in one transaction. A failing store raises (StoreError)
        and keeps nothing: the run ends with the error."""
        if not len(self):
            return
        calls, results, self._calls, self._results = self._calls, self._results, [], []
        messages, self._messages = self._messages, []
        decisions, selections = self._decisions, self._selections
        self._decisions, self._selections = [], []
        call_ids, decision_ids = self._recorder.store.record_group(calls, messages, decisions)
        for result, call_id in zip(results, call_ids, strict=True):
            result.call_id = call_id
        for selection, decision_id in zip(selections, decision_ids, strict=True):
            selection.decision_id = decision_id


def step_result(outcome: Outcome) -> str:
    """A call's outcome as a submitted run keeps it (JSON text): the whole ToolResult
    (but its record's id) and why it failed, which a resumed run gives back as it was."""
    kind = outcome.error_kind.value if outcome.error_kind else None
    result = to_jsonable_python(outcome.result, fallback=repr, exclude={"call_id"})
    return json_text({"result": result, "error_kind": kind})


def _capped(error: str | None, chars: int) -> str | None:
    """The error as stored: its first ``chars`` characters (``record_output_chars``,
    the output preview's size) and a note if it was longer."""
    if error is None or len(error) <= chars:
        return error
    return f"{error[:chars]}... [cut: {len(error)} characters in all]"


def _jsonable_arguments(arguments: Any) -> Any:
    """Bound arguments as JSON: the binder let through only what the log can store
    and read back; anything a caller slipped past it still gets recorded, made
    storable (``storable_arguments``)."""
    try:
        if arguments is None or isinstance(arguments, dict):
            return to_jsonable_python(arguments, fallback=repr)
        # Unparseable raw input (bad JSON, a list...): kept for the post-mortem.
        return {"_raw": to_jsonable_python(arguments, fallback=repr)}
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        stored = storable_arguments(arguments)
        return stored if isinstance(stored, dict) or stored is None else {"_raw": stored}
