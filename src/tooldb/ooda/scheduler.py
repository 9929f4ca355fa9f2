"""Run a job every N seconds beside a long-running process (``tooldb mcp --ooda-every``).

One daemon thread per job, waiting on an Event so ``stop`` ends it at once. A
run that raises is reported to ``on_error`` and the schedule goes on: a cycle
that found the tenant busy, or a store that was briefly unreachable, must not
end the server. Runs never overlap: the next wait starts when a run ends.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..errors import UsageError


def _to_stderr(name: str) -> Callable[[BaseException], None]:
    def report(exc: BaseException) -> None:
        detail = str(exc) or "".join(traceback.format_exception_only(type(exc), exc)).strip()
        sys.stderr.write(f"{name}: {detail}\n")

    return report


class Every:
    """Calls ``job()`` every ``seconds`` (first after one interval) until stopped."""

    def __init__(
        self,
        seconds: float,
        job: Callable[[], Any],
        *,
        name: str = "tooldb-scheduled",
        on_result: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if not seconds > 0:
            raise UsageError(f"a schedule needs a positive interval, got {seconds!r} seconds")
        self.seconds = seconds
        self.job = job
        self.name = name
        self.on_result = on_result
        self.on_error = on_error or _to_stderr(name)
        self.runs = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Every:
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = 10.0) -> None:
        """Stop waiting; a run in progress finishes first (up to ``timeout_s``)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.seconds):
            try:
                result = self.job()
                if self.on_result is not None:
                    self.on_result(result)
            except Exception as exc:
                self.failures += 1
                self.on_error(exc)
            finally:
                self.runs += 1

    def __enter__(self) -> Every:
        return self.start()

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.stop()
