"""A peak-concurrency gauge: tests assert that work overlapped (the peak), not how long
it took (wall time fails on a loaded machine)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tooldb import tool


class Gauge:
    """How many holders at once, and the most there ever were."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1

    async def hold_until(self, count: int, timeout_s: float = 10.0) -> None:
        """Hold the gauge until ``count`` holders are in at once (or ``timeout_s`` passed):
        overlap shows as the peak however slow the machine, and sequential work ends at
        the timeout instead of hanging."""
        with self.held():
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while self.peak < count and loop.time() < deadline:
                await asyncio.sleep(0.01)


#: The gauge of the ``overlap`` tool (reset it at the start of a test).
GAUGE = Gauge()


@tool
async def overlap(expected: int = 2) -> str:
    """Wait, holding the gauge, until ``expected`` calls are in at once."""
    await GAUGE.hold_until(expected)
    return f"peak {GAUGE.peak}"
