"""Persistence of one agent run: the run row, then its messages as they happen.

The row is written when the run starts (status ``running``, with its process as
``owner`` and a lease this process renews while the run is under way: leases.py),
messages after every model turn and every batch of tool results, and the outcome
when it ends; a run that is killed midway still shows its task and conversation up
to that point, and is marked ``interrupted`` once its lease expires. A turn of one
call has its messages written in the transaction of that call's record (``rows``;
agents/loop.py), so the record and the turn are committed together.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic_core import PydanticSerializationError

from ..models.base import Message
from ..settings import Settings
from ..stores import MessageRow, RunMessages, Store
from ..stores.storable import storable_arguments, storable_text, storable_value
from ..types import RunResult, RunStatus, ToolUse
from .leases import leases_for, owner_id
from .slow_calls import find_slow_calls

MAX_TASK_CHARS = 100_000


class RunLog:
    def __init__(
        self,
        store: Store,
        tenant: str,
        run_id: str,
        *,
        task: str,
        mode: str,
        agent: str | None = None,
        model: str | None = None,
        parent_run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        lease_s: float = 60.0,
        settings: Settings | None = None,
    ) -> None:
        self.store = store
        self.tenant = tenant
        self.settings = settings
        self.metadata = dict(metadata or {})
        self.run_id = run_id
        self._seq = 0
        self.started_at = time.time()
        self._leases = leases_for(store)
        store.create_run(
            {
                "id": run_id,
                "tenant": tenant,
                "parent_run_id": parent_run_id,
                "agent": agent,
                "mode": mode,
                "model": model,
                "task": storable_text(task[:MAX_TASK_CHARS]) or "",
                "status": RunStatus.RUNNING.value,
                "metadata": self.metadata,
                "started_at": self.started_at,
                "owner": owner_id(),
                "lease_expires_at": self.started_at + lease_s,
            }
        )
        self._leases.hold(run_id, lease_s, self)

    def add(self, iteration: int, messages: list[Message]) -> None:
        self.store.append_run_messages(self.run_id, self.rows(iteration, messages)[1])

    def rows(self, iteration: int, messages: list[Message]) -> RunMessages:
        """The rows that append these messages (their sequence numbers taken): for
        ``add``, or for a transaction that writes them with something else."""
        rows: list[MessageRow] = []
        for message in messages:
            rows.append((self._seq, iteration, message.role, _storable(message)))
            self._seq += 1
        return self.run_id, rows

    def finish(self, result: RunResult) -> None:
        """Store the outcome. Calls far slower than their tool's history (slow_calls.py)
        become ``result.warnings`` and the run metadata's ``slow_calls``."""
        self._leases.release(self.run_id)
        values: dict[str, Any] = {}
        if self.settings is not None and result.tool_calls:
            slow = find_slow_calls(self.store, self.tenant, result.tool_calls,
                                   before=self.started_at, settings=self.settings)  # fmt: skip
            if slow:
                result.warnings.extend(call.warning() for call in slow)
                values["metadata"] = {**self.metadata,
                                      "slow_calls": [call.as_json() for call in slow]}  # fmt: skip
        self.store.finish_run(
            self.run_id,
            {
                **values,
                "status": result.status.value,
                "output": storable_text(result.output),
                "data": _json_text(result.data),
                "error": storable_text(result.error),
                "requires_review": result.requires_review,
                "review_reason": result.review_reason,
                "iterations": result.iterations,
                "tool_calls": len(result.tool_calls),
                "input_tokens": result.input_tokens,
                "output_tokens": result.output_tokens,
                "ended_at": time.time(),
            },
        )


def _storable(message: Message) -> str:
    """The message as JSON text, fields at their defaults left out (``role`` has none).
    pydantic-core writes it in one step; text it cannot write (a lone surrogate) or
    that PostgreSQL would reject (a NUL) takes ``_json_text``'s clean-up instead."""
    try:
        text = message.model_dump_json(exclude_defaults=True)
    except (PydanticSerializationError, ValueError, RecursionError):
        text = "\\u0000"  # clean up below
    if "\\u0000" not in text:
        return text
    try:
        return _json_text(message.model_dump(mode="json", exclude_defaults=True))
    except (ValueError, RecursionError):  # a tool call's arguments nested past 255 levels
        dumped = message.model_dump(mode="python", exclude_defaults=True)
        return _json_text(storable_arguments(dumped))


def storable_use(use: ToolUse) -> dict[str, Any]:
    """A run's tool use as JSON for its data, whatever arguments the model sent."""
    row = use.model_dump(mode="json", exclude={"arguments"})
    row["arguments"] = storable_arguments(use.arguments)
    return row


def _json_text(value: Any) -> str:
    """JSON text every store accepts. Almost every value is clean already; only one
    holding a NUL (PostgreSQL's jsonb rejects it) or a lone surrogate takes the
    recursive clean-up, and a value that is not JSON at all is stored as null."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        return "null"
    if "\\u0000" not in text:
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass  # a lone surrogate: clean below
    return json.dumps(storable_value(json.loads(text)), ensure_ascii=False)


def resolve_run_id(store: Store, tenant: str, given: str) -> str:
    """The full id of the run ``given`` names: its id, any prefix of it that no other
    run of the tenant shares (``tooldb runs`` prints the first 12 characters), or
    ``last`` for the tenant's latest run."""
    from ..errors import NotFound, UsageError

    text = given.strip().lower()
    if text == "last":
        latest = store.list_runs(tenant, limit=1)
        if not latest:
            raise NotFound(f"no run yet in tenant {tenant!r}")
        return latest[0].id
    found = store.run_ids_with_prefix(tenant, text, limit=2)
    if not found:
        raise NotFound(f"no run {given!r} in tenant {tenant!r}")
    if len(found) > 1 and text not in found:
        raise UsageError(
            f"run id prefix {given!r} is ambiguous ({', '.join(found)} ...): give more characters"
        )
    return text if text in found else found[0]
