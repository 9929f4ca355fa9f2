"""Recording: every call goes into the log before ``call`` returns.

The insert and the statistics update share one committed transaction, so a
process killed right after ``call`` returns has lost nothing, and concurrent
writers keep the figures exact. Calls rejected at binding are logged too
(``error_kind = arguments``) but do not count against the tool's success rate:
a caller's bad arguments are not the tool failing.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic_core import to_jsonable_python

from .execution import Outcome
from .settings import Settings
from .stores import RunMessages, Store
from .types import ErrorKind, ToolRecord


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
        messages: RunMessages | None = None,
    ) -> int | None:
        """Log one call; returns its id (None when recording is off, when ``messages``
        are not written either). ``messages`` of a run are written in the record's
        transaction."""
        if not self.enabled:
            return None
        result = outcome.result
        output = result.output or ""
        row = {
            "tenant": self.tenant,
            "tool_id": tool.id,
            "tool_name": tool.name,
            "tool_version": tool.version,
            "run_id": run_id,
            "session_id": self.session_id,
            "arguments": _jsonable_arguments(arguments),
            "success": result.success,
            "error_kind": outcome.error_kind.value if outcome.error_kind else None,
            "error": storable_text(result.error),
            "output_size": len(output.encode("utf-8", "surrogatepass")),
            "output_preview": storable_text(output[: self.preview_chars]) if output else None,
            "duration_ms": result.duration_ms,
            "started_at": outcome.started_at,
        }
        counted = outcome.error_kind is not ErrorKind.ARGUMENTS
        return self.store.record_call(row, counted=counted, messages=messages)


def storable_text(text: str | None) -> str | None:
    """Text every store accepts: no NUL (PostgreSQL) and no lone surrogates (UTF-8)."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _jsonable_arguments(arguments: Any) -> Any:
    if arguments is None or isinstance(arguments, dict):
        return to_jsonable_python(arguments, fallback=repr)
    # Unparseable raw input (bad JSON, a list...): keep it verbatim for the post-mortem.
    return {"_raw": to_jsonable_python(arguments, fallback=repr)}
