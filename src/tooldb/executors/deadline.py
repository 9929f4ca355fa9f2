"""Stop synchronous Python code that runs past its deadline.

Python cannot kill a thread, so the deadline raises ``DeadlineExceeded`` (a
BaseException, so a tool's ``except Exception`` cannot swallow it) inside the
thread running the tool:

* in the main thread, through ``SIGALRM``: this also interrupts blocking calls
  such as ``time.sleep`` or a socket read;
* in any other thread, through ``PyThreadState_SetAsyncExc`` from a watchdog
  thread: this stops Python code at once, but a blocking C call finishes first.

Tools that must be killed hard whatever they do belong in a subprocess kind.
"""

from __future__ import annotations

import _signal
import ctypes
import heapq
import itertools
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class DeadlineExceeded(BaseException):
    """Raised inside the tool's thread when its time is up."""


class deadline:
    """Run the block under a deadline; raises DeadlineExceeded when it is exceeded.

    A plain class rather than a generator-based context manager: it wraps every call
    of a Python tool."""

    __slots__ = ("_guard", "_seconds")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._guard: Any = None

    def __enter__(self) -> None:
        seconds = self._seconds
        if seconds is None or seconds <= 0:
            return
        handler = _alarm_handler()
        if handler is not _UNUSABLE:
            _arm(seconds, handler)
            self._guard = _ALARM
        else:
            guard = _WATCHDOG.guard(seconds)
            guard.__enter__()
            self._guard = guard

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> bool | None:
        guard = self._guard
        if guard is None:
            return None
        self._guard = None
        if guard is _ALARM:
            _disarm()
            return None
        return guard.__exit__(kind, value, traceback)


def _alarm_handler() -> Any:
    """SIGALRM's current handler if a deadline can use the alarm, else ``_UNUSABLE``: the
    main thread, no deadline already running there, and SIGALRM free (default, ignored,
    or ours from an earlier call), so an application's handler is never taken over."""
    if _ALARM.armed or not _HAS_ITIMER or threading.current_thread() is not threading.main_thread():
        return _UNUSABLE
    handler = _handler()
    if handler is _on_alarm or handler in _FREE:
        return handler
    return _UNUSABLE


_UNUSABLE = object()

_HAS_ITIMER = hasattr(signal, "setitimer")
#: Handlers that leave SIGALRM free for a deadline (no handler at all reads as None).
_FREE = (signal.SIG_DFL, signal.SIG_IGN, None)


def _handler() -> Any:
    """SIGALRM's handler, without ``signal.getsignal``'s enum conversion (a third of a
    trivial call's deadline cost); the C function it wraps returns plain values."""
    return _signal.getsignal(signal.SIGALRM)


class _AlarmState:
    armed = False


_ALARM = _AlarmState()


def _on_alarm(_signum: int, _frame: Any) -> None:
    if _ALARM.armed:
        raise DeadlineExceeded


def _arm(seconds: float, handler: Any) -> None:
    """Installing a handler costs more than the call of a trivial tool, so ours stays
    installed once set (it ignores an alarm when no deadline is armed); only the timer
    is set and cleared per call (``_disarm``). ``handler`` is SIGALRM's current one."""
    if handler is not _on_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    _ALARM.armed = True
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm() -> None:
    _ALARM.armed = False
    signal.setitimer(signal.ITIMER_REAL, 0)


class _Timer:
    __slots__ = ("fired", "pending", "thread_id")

    def __init__(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.pending = True
        self.fired = False


class _Watchdog:
    """One daemon thread serving every deadline of non-main threads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Timer]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None

    @contextmanager
    def guard(self, seconds: float) -> Iterator[None]:
        timer = _Timer(threading.get_ident())
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._counter), timer))
            self._ensure_thread()
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                timer.pending = False
                fired = timer.fired
            if fired:
                # The exception may have been scheduled but not yet raised: clear it
                # so it cannot surface later in unrelated code, then report the timeout.
                _set_async_exc(timer.thread_id, None)
                raise DeadlineExceeded

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="tooldb-deadline", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and not self._heap[0][2].pending:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                due, _, timer = self._heap[0]
                remaining = due - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                heapq.heappop(self._heap)
                timer.fired = True
                _set_async_exc(timer.thread_id, DeadlineExceeded)


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


_WATCHDOG = _Watchdog()
