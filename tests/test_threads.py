"""The shared alarm clock behind SQL timeouts: fires in order, cancels cleanly."""

from __future__ import annotations

import threading
import time

from tooldb.executors import threads
from tooldb.executors.threads import call_later


def test_alarms_fire_in_due_order_and_cancel() -> None:
    fired: list[str] = []
    done = threading.Event()
    call_later(0.3, lambda: (fired.append("late"), done.set()))
    cancelled = call_later(0.1, lambda: fired.append("cancelled"))
    call_later(0.05, lambda: fired.append("early"))  # earlier than the head: wakes the clock
    cancelled.cancel()
    started = time.monotonic()
    assert done.wait(5)
    assert fired == ["early", "late"]
    assert 0.25 < time.monotonic() - started < 2


def test_many_cancelled_alarms_are_pruned() -> None:
    for _ in range(10_000):
        call_later(60, lambda: None).cancel()
    assert len(threads._CLOCK._heap) <= 4096  # not 10,000 dead entries waiting a minute
    done = threading.Event()
    call_later(0.01, done.set)
    assert done.wait(5)
