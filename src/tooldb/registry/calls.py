"""Calling tools: bind, run and record (a mixin of Registry).

One call resolves the tool's head (enabled, current) and its cached Binder, binds the
arguments (a rejection is recorded too), runs the tool on its executor within its
timeout, and records the outcome. ``acall`` keeps a blocking tool's bind, run and record
in one worker-thread hop (inline_calls.py); the agent loop runs calls ``inline`` and may
hold their records to commit them in a group (recording.HeldRecords).
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..background_loop import run_sync
from ..binding import Binder
from ..context import calling
from ..errors import ArgumentError, NotFound, ToolDisabled, UsageError
from ..execution import Outcome, aexecute, execute
from ..executors import Executor, executor_for
from ..executors.threads import run_blocking
from ..recording import HeldRecords, Recorder
from ..settings import Settings
from ..stores import RunMessages, Store, ToolHead
from ..types import BoundCall, ErrorKind, ToolKind, ToolRecord, ToolResult
from .inline_calls import InlineCall, runs_blocking
from .parallel import run_many

if TYPE_CHECKING:
    from . import Registry


class CallPath:
    store: Store
    settings: Settings
    tenant: str
    executors: dict[ToolKind, Executor]
    recorder: Recorder
    _bound: dict[tuple[int, str], tuple[ToolRecord, Binder | None]]

    @property
    def _registry(self) -> Registry:
        """This object as the Registry it is a part of (what ``calling`` records)."""
        return cast("Registry", self)

    def bind(self, name: str, arguments: Any = None) -> BoundCall:
        """Resolve an enabled tool and validate arguments (raises NotFound, ToolDisabled,
        ArgumentError)."""
        tool, binder = self._resolve(name)
        return BoundCall(tool=tool, arguments=binder.bind(arguments, self.tenant))

    def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        run_id: str | None = None,
        timeout_s: float | None = None,
        task: str | None = None,
    ) -> ToolResult:
        """Bind, execute and record one call.

        The caller's mistakes raise (NotFound, ToolDisabled, ArgumentError); whatever the
        tool does — raise, time out — comes back as a ToolResult with ``success=False``.
        ``task``: what the call was for; selection learns from it (learning.py): a
        success is evidence for the tool on similar tasks, a failure against.
        """
        bound = self._bind_recording_rejects(name, arguments, run_id)
        with calling(self._registry):
            outcome = execute(
                self._executor(bound.tool), bound, self._timeout(bound.tool, timeout_s)
            )
        result = self._finish(bound, outcome, run_id)
        if task is not None:
            self._registry.learn(task, bound.tool.name, good=result.success)
        return result

    async def acall(
        self,
        name: str,
        arguments: Any = None,
        *,
        run_id: str | None = None,
        timeout_s: float | None = None,
        inline: bool = False,
        record_also: RecordAlso | None = None,
        step: str | None = None,
    ) -> ToolResult:
        """``call`` for code already inside an event loop.

        The store's reads and the record's commit run in worker threads, so concurrent
        calls (``acall_many``) do not wait on each other's database round trips; a
        blocking tool is bound, run and recorded in one hop (inline_calls.py). If the
        awaiting task is cancelled while the tool runs, the call is recorded as cancelled.
        ``inline=True`` does that hop's work on the calling thread instead: for a caller
        that owns its loop and has nothing else to run meanwhile (agents/loop.py).
        ``record_also`` (inline calls only; the agent loop's turn) is told before the
        tool runs, and given the result of a call that ran: the run messages it returns
        are written in the record's transaction, and the record is held in its
        ``held`` group, committed with the others when the loop is about to wait.
        ``step``: a submitted run's key for the call, under which its record's
        transaction keeps the full result for a resumed run (workers/durable.py).
        """
        if inline:  # nothing runs meanwhile, so nobody can give up halfway: no InlineCall
            with calling(self._registry):
                hop = self._call_inline(name, arguments, run_id, timeout_s, record_also)
        else:
            one_hop = InlineCall(
                lambda: self._bind_recording_rejects(name, arguments, run_id, step=step),
                lambda bound: (self._executor(bound.tool), self._timeout(bound.tool, timeout_s)),
                lambda bound, outcome: self._finish(bound, outcome, run_id, step=step),
            )
            try:
                with calling(self._registry):
                    hop = await run_blocking(one_hop.in_thread)
            except asyncio.CancelledError:
                one_hop.give_up()
                raise
        if isinstance(hop, ToolResult):  # a blocking tool: bound, run and recorded there
            return hop
        bound = hop
        timeout = self._timeout(bound.tool, timeout_s)

        def record_cancelled(outcome: Outcome) -> None:
            self._finish(bound, outcome, run_id, step=step)

        with calling(self._registry):
            outcome = await aexecute(self._executor(bound.tool), bound, timeout, record_cancelled)
        return await run_blocking(self._finish, bound, outcome, run_id, None, step)

    async def acall_many(
        self,
        requests: Sequence[tuple[str, Any]],
        *,
        run_id: str | None = None,
        timeout_s: float | None = None,
        max_parallel: int | None = None,
        max_parallel_per_tool: int | None = None,
    ) -> builtins.list[ToolResult]:
        """Run independent calls concurrently; one ToolResult per request, in request order.

        Nothing in the batch raises: an unknown or disabled tool or arguments that do not
        bind come back as a failed ToolResult in their slot, and one failure cancels
        nothing else. At most ``max_parallel`` calls run at once (default: the
        ``max_parallel_calls`` setting) and at most ``max_parallel_per_tool`` of any one
        tool (setting ``max_parallel_per_tool``). If the caller cancels (e.g. through
        ``asyncio.wait_for``), running calls are stopped and recorded as cancelled;
        queued ones never start. See ``parallel.py``.
        """
        return await run_many(
            self._registry,
            requests,
            run_id=run_id,
            timeout_s=timeout_s,
            max_parallel=max_parallel,
            max_parallel_per_tool=max_parallel_per_tool,
        )

    def call_many(
        self,
        requests: Sequence[tuple[str, Any]],
        *,
        run_id: str | None = None,
        timeout_s: float | None = None,
        max_parallel: int | None = None,
        max_parallel_per_tool: int | None = None,
    ) -> builtins.list[ToolResult]:
        """``acall_many`` from synchronous code (also from inside a running event loop)."""
        return run_sync(
            self.acall_many(
                requests,
                run_id=run_id,
                timeout_s=timeout_s,
                max_parallel=max_parallel,
                max_parallel_per_tool=max_parallel_per_tool,
            )
        )

    def _call_inline(
        self,
        name: str,
        arguments: Any,
        run_id: str | None,
        timeout_s: float | None,
        also: RecordAlso | None = None,
    ) -> ToolResult | BoundCall:
        """``InlineCall.in_thread`` on the calling thread, for a caller with nothing else
        to run meanwhile: bind; a blocking tool is also run and recorded (its ToolResult),
        anything else comes back bound for the caller to run on its loop."""
        held = also.held if also is not None and self.recorder.enabled else None
        bound = self._bind_recording_rejects(name, arguments, run_id, held)
        executor = self._executor(bound.tool)
        waits = not runs_blocking(executor, bound)
        if also is not None:
            also.before_run(bound.tool, waits)
        if waits:
            return bound
        outcome = execute(executor, bound, self._timeout(bound.tool, timeout_s))
        return self._finish(bound, outcome, run_id, also)

    def _bind_recording_rejects(
        self,
        name: str,
        arguments: Any,
        run_id: str | None,
        held: HeldRecords | None = None,
        step: str | None = None,
    ) -> BoundCall:
        tool, binder = self._resolve(name)
        try:
            return BoundCall(tool=tool, arguments=binder.bind(arguments, self.tenant, run_id))
        except ArgumentError as exc:
            rejected = Outcome(ToolResult.failure(str(exc)), ErrorKind.ARGUMENTS, time.time())
            if held is not None:  # in order with the records held before it
                held.hold(tool, arguments, rejected, run_id, None)
            else:
                self.recorder.record(tool, arguments, rejected, run_id=run_id, step=step)
            raise

    def _finish(
        self,
        bound: BoundCall,
        outcome: Outcome,
        run_id: str | None,
        also: RecordAlso | None = None,
        step: str | None = None,
    ) -> ToolResult:
        result = outcome.result
        if also is not None and also.held is not None and self.recorder.enabled:
            # with the turn's messages; its call_id comes with the commit
            also.held.hold(bound.tool, bound.arguments, outcome, run_id, also(result))
            return result
        result.call_id = self.recorder.record(
            bound.tool, bound.arguments, outcome, run_id=run_id, step=step
        )
        return result

    def _resolve(self, name: str) -> tuple[ToolRecord, Binder]:
        if not isinstance(name, str):
            raise UsageError(f"tool name must be a string, got {type(name).__name__}")
        head = self.store.tool_head(self.tenant, name)
        if head is None:
            raise self._not_found(name)
        if not head.enabled:
            raise ToolDisabled(f"tool {name!r} is disabled in tenant {self.tenant!r}")
        cached = self._bound.get((head.id, head.content_hash))
        if cached is not None:
            tool, binder = cached
            return (tool, binder) if binder is not None else self._cache_binder(tool)
        return self._load(name, head)

    def _load(self, name: str, head: ToolHead) -> tuple[ToolRecord, Binder]:
        tool = self.store.get_tool(self.tenant, name)
        if tool is None:  # removed between the two reads
            raise self._not_found(name)
        return self._cache_binder(tool)

    def _cache_binder(self, tool: ToolRecord) -> tuple[ToolRecord, Binder]:
        """The tool's record with its binder, made once per version."""
        key = (tool.id, tool.content_hash)
        entry = self._bound.get(key)
        if entry is not None and entry[1] is not None:
            return entry[0], entry[1]
        bound = (entry[0] if entry is not None else tool, Binder(tool.name, tool.spec.parameters))
        self._remember(key, bound)
        return bound

    def _cache_record(self, tool: ToolRecord) -> None:
        """Keep a record read for a toolbox; its binder is made at its first call (a run
        offers 8 tools and may call one: ~13 µs a binder)."""
        key = (tool.id, tool.content_hash)
        if key not in self._bound:
            self._remember(key, (tool, None))

    def _remember(self, key: tuple[int, str], entry: tuple[ToolRecord, Binder | None]) -> None:
        if len(self._bound) > 10_000:
            self._bound.clear()
        self._bound[key] = entry

    def _executor(self, tool: ToolRecord) -> Executor:
        executor = self.executors.get(tool.spec.kind)
        return executor if executor is not None else executor_for(self.executors, tool.spec.kind)

    def _timeout(self, tool: ToolRecord, override: float | None) -> float | None:
        if override is not None:
            if override <= 0:
                raise UsageError(f"timeout must be positive, got {override}")
            return override
        return tool.spec.timeout_s or self.settings.default_timeout_s

    def _not_found(self, name: str) -> NotFound:
        return NotFound(f"no tool named {name!r} in tenant {self.tenant!r}")


class RecordAlso(Protocol):
    """What a caller that runs calls inline (the agent loop's turn) adds to their records."""

    #: Where to hold the record instead of committing it at once (None: commit).
    held: HeldRecords | None

    def __call__(self, result: ToolResult) -> RunMessages | None:
        """Given the result before it is recorded: run messages to write with it."""

    def before_run(self, tool: ToolRecord, waits: bool) -> None:
        """Called once the call is bound, before its tool runs (``waits``: on the loop,
        where it may suspend): the caller's last chance to commit what it holds."""
