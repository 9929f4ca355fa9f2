"""One call of a blocking tool done wholly in one worker thread: bind, run, record.

``Registry.acall`` used to hop to the thread pool three times per call (the
store read that binds, the sync tool itself, the record's commit); each hop is a
queue hand-off and an event-loop wake-up, about half of an agent turn's cost.
For tools whose executor only blocks a thread anyway (plain Python functions)
one hop does all three. Everything else (async tools, subprocess and network
kinds) comes back bound, and the caller runs it on the loop as before.

The caller may give up (cancellation) while the thread works. Exactly one side
records the call: the thread if the tool finished first, else the caller, as
cancelled, the moment it gives up. A call given up before it started is never
run and never recorded, as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..execution import Outcome, cancelled, execute
from ..executors import Executor
from ..types import BoundCall, ToolResult

Bind = Callable[[], BoundCall]
Plan = Callable[[BoundCall], tuple[Executor, float | None]]
Finish = Callable[[BoundCall, Outcome], ToolResult]


def runs_blocking(executor: Executor, bound: BoundCall) -> bool:
    """Whether the tool only blocks a thread (the Blocking protocol, without a
    runtime-checkable isinstance). A tool the executor cannot even load (a module that
    no longer imports) is not: the caller then runs it the long way, where the failure
    is recorded like any other."""
    blocking = getattr(executor, "blocking", None)
    if blocking is None:
        return False
    try:
        return bool(blocking(bound.tool))
    except Exception:
        return False


class InlineCall:
    """The shared state of one call between the worker thread and the awaiting caller."""

    def __init__(self, bind: Bind, plan: Plan, finish: Finish) -> None:
        self._bind = bind
        self._plan = plan
        self._finish = finish
        self._lock = threading.Lock()
        self._given_up = False
        self._recorded = False
        self._running: BoundCall | None = None
        self._started = (0.0, 0.0)  # perf_counter, wall clock

    def in_thread(self) -> ToolResult | BoundCall:
        """Bind; for a blocking tool also run and record (the ToolResult), else the
        BoundCall for the caller to run on its loop."""
        bound = self._bind()
        executor, timeout_s = self._plan(bound)
        if not runs_blocking(executor, bound):
            return bound
        with self._lock:
            if self._given_up:
                return bound  # nobody is waiting: do not start it
            self._running = bound
            self._started = (time.perf_counter(), time.time())
        outcome = execute(executor, bound, timeout_s)
        with self._lock:
            if self._recorded:  # the caller gave up first and recorded the cancellation
                return outcome.result
            self._recorded = True
        return self._finish(bound, outcome)

    def give_up(self) -> None:
        """The caller was cancelled: record the running call as cancelled, unless the
        thread has already recorded its result."""
        with self._lock:
            self._given_up = True
            bound = self._running
            if bound is None or self._recorded:
                return
            self._recorded = True
        self._finish(bound, cancelled(bound, *self._started))
