"""The thread pool that runs blocking work (sync tools, database drivers) for async callers.

``asyncio.to_thread`` uses the loop's default executor, which has ``cpu_count + 4``
threads: on a small machine that quietly serialises a batch of parallel calls.
This pool is shared by every executor and grows to whatever the registries ask of
it (``reserve``); threads are only started when work arrives, and the caller's
limits (``max_parallel_calls``) decide how many calls actually run at once.
``call_later`` is the matching alarm clock for timeouts of blocking calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_WORKERS = 64

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_size = DEFAULT_WORKERS


def reserve(workers: int) -> None:
    """Make sure at least ``workers`` blocking calls can run at once.

    A bigger pool replaces the current one; work already running there finishes.
    """
    global _pool, _size
    with _lock:
        if workers <= _size:
            return
        _size = workers
        old, _pool = _pool, None
    if old is not None:
        old.shutdown(wait=False)


def _current() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_size, thread_name_prefix="tooldb-call")
        return _pool


async def run_blocking(func: Callable[..., T], /, *args: Any) -> T:
    """Run ``func(*args)`` in the pool, with the caller's context variables."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return await loop.run_in_executor(_current(), functools.partial(context.run, func, *args))


def _forget_pool_after_fork() -> None:
    global _pool, _lock, _CLOCK
    _pool = None  # its threads do not exist in the child
    _lock = threading.Lock()
    _CLOCK = _AlarmClock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


class Alarm:
    """A pending ``call_later``; ``cancel`` is cheap and safe after it fired."""

    __slots__ = ("action", "pending")

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.pending = True

    def cancel(self) -> None:
        self.pending = False


class _AlarmClock:
    """One daemon thread firing every alarm: starting a ``threading.Timer`` per call
    costs a thread start, which waits for the new thread to be scheduled (up to a
    millisecond on a busy machine)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Alarm]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None
        self._prune_at = 4096

    def call_later(self, seconds: float, action: Callable[[], None]) -> Alarm:
        alarm = Alarm(action)
        with self._cond:
            if len(self._heap) >= self._prune_at:  # cancelled alarms far in the future
                self._heap = [entry for entry in self._heap if entry[2].pending]
                heapq.heapify(self._heap)
                self._prune_at = max(4096, 2 * len(self._heap))
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._counter), alarm))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="tooldb-alarm", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is alarm:
                self._cond.notify()
        return alarm

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and not self._heap[0][2].pending:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                due, _, alarm = self._heap[0]
                remaining = due - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                heapq.heappop(self._heap)
            if alarm.pending:
                alarm.pending = False
                with contextlib.suppress(Exception):
                    alarm.action()


_CLOCK = _AlarmClock()


def call_later(seconds: float, action: Callable[[], None]) -> Alarm:
    """Run ``action`` in the alarm thread after ``seconds`` unless cancelled first."""
    return _CLOCK.call_later(seconds, action)
