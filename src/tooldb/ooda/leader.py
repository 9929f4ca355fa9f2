"""OODA on a schedule without a server (``tooldb ooda schedule --every 1h``): a
foreground process for systemd or cron, of which any number may run against one
store; one of them leads and runs the cycles.

Leadership is a lease in ``ooda_locks`` (the table whose per-tenant lease keeps two
cycles from acting at once) under a key no tenant can have (the tenant's name and a
control character, which names refuse). The leader renews it every heartbeat; a
follower that finds it expired (the leader was killed, its machine lost) takes it
over within one lease. A cycle still takes the tenant's own lease, so a cycle run by
hand (``tooldb ooda run``) and a scheduled one never act at once either.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UsageError
from ..stores import Store
from .types import OodaReport

#: Appended to the tenant's name for the leader's lease: names cannot hold a control
#: character (types.check_name), so it cannot be another tenant's key.
_LEADER_SUFFIX = "\x1fooda-schedule"
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", re.I)


def parse_interval(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1h``, ``1d`` to seconds; a clear error otherwise."""
    match = _DURATION.fullmatch(text)
    if match is None or float(match.group(1)) <= 0:
        raise UsageError(
            f"interval {text!r} is not a positive duration: give seconds or a number with "
            "s, m, h or d (90, 90s, 15m, 1h, 1d)"
        )
    return float(match.group(1)) * _UNITS[(match.group(2) or "s").lower()]


@dataclass(frozen=True)
class Event:
    """What the scheduler reports: ``lead``, ``follow``, ``cycle``, ``failed``, ``stop``."""

    kind: str
    detail: str
    report: OodaReport | None = None


class ScheduleLeader:
    """Runs ``cycle()`` every ``every_s`` seconds while this process leads the tenant's
    schedule. The first cycle comes one interval after this process starts leading."""

    def __init__(
        self,
        store: Store,
        tenant: str,
        cycle: Callable[[], OodaReport],
        every_s: float,
        *,
        heartbeat_s: float | None = None,
        on_event: Callable[[Event], None] = lambda event: None,
    ) -> None:
        if not every_s > 0:
            raise UsageError(f"a schedule needs a positive interval, got {every_s!r} seconds")
        self.store = store
        self.key = tenant + _LEADER_SUFFIX
        self.cycle = cycle
        self.every_s = every_s
        self.heartbeat_s = heartbeat_s or min(every_s, 30.0)
        #: A leader that misses three heartbeats is taken over.
        self.lease_s = 3 * self.heartbeat_s
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.on_event = on_event
        self.leading = False
        self._announced: bool | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        """Lead or stand by until ``stop()``; releases the lease on the way out."""
        next_cycle: float | None = None
        try:
            while not self.stopped.is_set():
                leading = self._hold_lease()
                now = time.monotonic()
                if leading and next_cycle is None:
                    next_cycle = now + self.every_s
                if not leading:
                    next_cycle = None
                elif next_cycle is not None and now >= next_cycle:
                    self._run_cycle()
                    next_cycle = time.monotonic() + self.every_s
                wait = self.heartbeat_s
                if next_cycle is not None:
                    wait = max(0.0, min(wait, next_cycle - time.monotonic()))
                self.stopped.wait(wait)
        finally:
            if self.leading:
                self.store.release_ooda_lock(self.key, self.holder)
            self.on_event(Event("stop", f"{self.holder} stopped"))

    def stop(self) -> None:
        self.stopped.set()

    def _hold_lease(self) -> bool:
        """Renew the lease when leading, else try to take it; report each change."""
        if self.leading and self.store.renew_ooda_lock(self.key, self.holder, self.lease_s):
            return True
        taken, owner, _ = self.store.acquire_ooda_lock(self.key, self.holder, self.lease_s)
        if taken is not self._announced:
            self._announced = taken
            if taken:
                every = _span(self.every_s)
                self.on_event(Event("lead", f"{self.holder} leads: a cycle every {every}"))
            else:
                self.on_event(Event("follow", f"{self.holder} stands by: {owner} leads"))
        self.leading = taken
        return taken

    def _run_cycle(self) -> None:
        """One cycle, the lease renewed beside it: a cycle may outlast the lease."""
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self.heartbeat_s):
                try:
                    self.store.renew_ooda_lock(self.key, self.holder, self.lease_s)
                except Exception:  # the store briefly gone: the next beat retries
                    continue

        renewer = threading.Thread(target=renew, name="ooda-schedule-lease", daemon=True)
        renewer.start()
        try:
            report = self.cycle()
        except Exception as exc:  # a busy tenant or a store briefly gone: go on
            self.on_event(Event("failed", f"cycle failed: {exc}"))
            return
        finally:
            done.set()
            renewer.join()
        self.on_event(
            Event(
                "cycle",
                f"cycle {report.cycle_id}: {report.tools_analyzed} tools, "
                f"{len(report.findings)} findings, {len(report.acts)} acts",
                report,
            )
        )


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
