"""`tooldb ooda schedule --every I` (issue 28.7): OODA on a schedule without a server.
Any number of schedulers may run against one store; exactly one leads and runs the
cycles; when the leader dies (SIGKILL: no chance to release) another takes over
within its lease; a cycle still takes the tenant's own lease."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tooldb
from tooldb import Registry, UsageError
from tooldb.ooda.leader import Event, ScheduleLeader, parse_interval
from tooldb.ooda.types import OodaReport

ROOT = Path(__file__).resolve().parent.parent


def test_intervals_are_read_with_their_units_and_bad_ones_are_refused() -> None:
    assert parse_interval("90") == 90
    assert parse_interval("90s") == 90
    assert parse_interval("15m") == 900
    assert parse_interval("1h") == 3600
    assert parse_interval("1.5d") == 1.5 * 86400
    assert parse_interval(" 2 H ") == 7200  # spaces and either case
    for bad in ("0", "0s", "-1h", "1w", "h", "", "1 hour"):
        with pytest.raises(UsageError) as refused:
            parse_interval(bad)
        assert str(refused.value) == (
            f"interval {bad!r} is not a positive duration: give seconds or a number with "
            "s, m, h or d (90, 90s, 15m, 1h, 1d)"
        )


def test_one_of_several_schedulers_leads_and_the_tenants_are_apart(registry: Registry) -> None:
    events: list[tuple[int, Event]] = []
    lock = threading.Lock()

    def scheduler(index: int, reg: Registry) -> ScheduleLeader:
        def note(event: Event) -> None:
            with lock:
                events.append((index, event))

        return ScheduleLeader(reg.store, reg.tenant, reg.ooda, 0.6, heartbeat_s=0.25,
                              on_event=note)  # fmt: skip

    other = registry.for_tenant("other")
    leaders = [scheduler(0, registry), scheduler(1, registry), scheduler(2, other)]
    threads = [threading.Thread(target=leader.run) for leader in leaders]
    for thread in threads:
        thread.start()
    time.sleep(3)
    for leader in leaders:
        leader.stop()
    for thread in threads:
        thread.join(10)
    led = {index for index, event in events if event.kind == "lead"}
    cycled = {index for index, event in events if event.kind == "cycle"}
    assert 2 in led and 2 in cycled  # another tenant's schedule has its own leader
    assert len(led & {0, 1}) == 1 and cycled & {0, 1} == led & {0, 1}
    follower = ({0, 1} - led).pop()
    assert any(i == follower and e.kind == "follow" for i, e in events)
    cycles = [e for i, e in events if e.kind == "cycle" and i in {0, 1}]
    assert 2 <= len(cycles) <= 5  # every 0.6 s for 3 s, the first after one interval
    assert all(e.report is not None and not e.report.dry_run for e in cycles)


def schedule_process(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tooldb", "--db", url, "ooda", "schedule", "--every", "1s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )


def wait_for(process: subprocess.Popen[str], text: str, timeout_s: float = 60) -> str:
    """Lines of ``process`` up to the first containing ``text``."""
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"{text!r} not printed; got:\n{''.join(seen)}")


def test_a_follower_takes_over_when_the_leader_is_killed(sqlite_url: str) -> None:
    tooldb.open(sqlite_url).close()
    first = schedule_process(sqlite_url)
    second = None
    try:
        wait_for(first, "leads: a cycle every 1s")
        wait_for(first, "cycle 1:")
        second = schedule_process(sqlite_url)
        wait_for(second, "stands by")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        taken = time.monotonic()
        wait_for(second, "leads: a cycle every 1s", timeout_s=20)
        assert time.monotonic() - taken < 10  # the lease is three heartbeats: 3 s
        wait_for(second, "cycle ")
        second.send_signal(signal.SIGTERM)
        wait_for(second, "stopped")
        assert second.wait(10) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)


# -- the leader in-process, driven by its heartbeats (mutation group catalog_integrity)


class CountingStore:
    """The registry's real store, counting the lease renewals it made and optionally
    failing chosen ones (a store briefly gone); everything else passes straight through."""

    def __init__(self, store: Any, fail_renewals: int = 0) -> None:
        self.store = store
        self.renewals = 0
        self.failed = 0
        self.fail_renewals = fail_renewals
        self.renewed = threading.Condition()
        self.acquires: list[str] = []
        #: (leader, n): stop that leader at its n-th try to take the lease
        self.stop_after_acquires: tuple[ScheduleLeader, int] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def renew_ooda_lock(self, tenant: str, holder: str, ttl_s: float) -> bool:
        if self.failed < self.fail_renewals:
            self.failed += 1
            raise ConnectionError("store briefly gone")
        renewed = self.store.renew_ooda_lock(tenant, holder, ttl_s)
        with self.renewed:
            self.renewals += renewed  # only those the store took: the holder's own lease
            self.renewed.notify_all()
        return renewed

    def acquire_ooda_lock(self, tenant: str, holder: str, ttl_s: float) -> tuple[bool, str, float]:
        self.acquires.append(holder)
        if self.stop_after_acquires and len(self.acquires) == self.stop_after_acquires[1]:
            self.stop_after_acquires[0].stop()
        return self.store.acquire_ooda_lock(tenant, holder, ttl_s)

    def wait_renewals(self, count: int) -> bool:
        """Wait (bounded) until ``count`` renewals in all have succeeded."""
        with self.renewed:
            return self.renewed.wait_for(lambda: self.renewals >= count, timeout=30)


def no_cycle() -> OodaReport:
    raise AssertionError("no cycle was due")


def test_a_leader_s_interval_heartbeat_lease_and_holder(registry: Registry) -> None:
    store = registry.store
    hourly = ScheduleLeader(store, "t", no_cycle, 3600)
    assert (hourly.heartbeat_s, hourly.lease_s) == (30.0, 90.0)  # a beat at most every 30 s
    brisk = ScheduleLeader(store, "t", no_cycle, 2)
    assert (brisk.heartbeat_s, brisk.lease_s) == (2, 6)  # a beat at least every interval
    chosen = ScheduleLeader(store, "t", no_cycle, 2, heartbeat_s=0.5)
    assert (chosen.heartbeat_s, chosen.lease_s) == (0.5, 1.5)
    host, pid, token = hourly.holder.split(":")
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert re.fullmatch(r"[0-9a-f]{8}", token) and hourly.holder != brisk.holder
    assert hourly.leading is False and not hourly.stopped.is_set()
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(UsageError, match=rf"needs a positive interval, got {bad!r} seconds"):
            ScheduleLeader(store, "t", no_cycle, bad)


def test_the_leaders_lease_is_apart_from_the_tenants_own(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    leader = ScheduleLeader(store, tenant, no_cycle, 3600)
    assert leader._hold_lease()
    taken, owner, _ = store.acquire_ooda_lock(tenant + "\x1fooda-schedule", "other", 60)
    assert (taken, owner) == (False, leader.holder)  # the leader's key, held by it
    assert registry.ooda().cycle_id is not None  # a cycle by hand takes the tenant's own


def test_lead_and_follow_are_reported_once_each_change(registry: Registry) -> None:
    store = registry.store
    events: list[Event] = []
    first = ScheduleLeader(store, "t", no_cycle, 3600, on_event=events.append)
    second = ScheduleLeader(store, "t", no_cycle, 60, on_event=events.append)
    assert first._hold_lease() and first._hold_lease() and first.leading
    assert not second._hold_lease() and not second._hold_lease() and not second.leading
    assert [(e.kind, e.detail) for e in events] == [
        ("lead", f"{first.holder} leads: a cycle every 1h"),
        ("follow", f"{second.holder} stands by: {first.holder} leads"),
    ]
    store.release_ooda_lock(first.key, first.holder)  # as if its lease had run out
    assert second._hold_lease() and second.leading
    assert not first._hold_lease() and not first.leading  # its renewal fails: it follows
    assert [(e.kind, e.detail) for e in events[2:]] == [
        ("lead", f"{second.holder} leads: a cycle every 1m"),
        ("follow", f"{first.holder} stands by: {second.holder} leads"),
    ]


def test_the_interval_is_shown_in_its_largest_whole_unit(registry: Registry) -> None:
    shown = {}
    for index, every in enumerate((86400, 172800, 3600, 5400, 7200, 60, 120, 90, 59, 1.5)):
        events: list[Event] = []
        leader = ScheduleLeader(registry.store, f"t{index}", no_cycle, every,
                                on_event=events.append)  # fmt: skip
        assert leader._hold_lease()
        shown[every] = events[0].detail.rsplit(" ", 1)[1]
    assert shown == {86400: "1d", 172800: "2d", 3600: "1h", 5400: "90m", 7200: "2h",
                     60: "1m", 120: "2m", 90: "90s", 59: "59s", 1.5: "1.5s"}  # fmt: skip


def run_leader(leader: ScheduleLeader) -> list[tuple[float, Event]]:
    """Run ``leader`` on a thread until its cycle (or its store) stops it; its events,
    each timed. A liveness bound only: a leader still running after a minute is stuck."""
    events: list[tuple[float, Event]] = []
    leader.on_event = lambda event: events.append((time.monotonic(), event))
    runner = threading.Thread(target=leader.run)
    runner.start()
    runner.join(60)
    stuck = runner.is_alive()
    leader.stop()
    runner.join(60)
    assert not stuck, "the leader did not stop within a minute"
    return events


def test_cycles_come_an_interval_apart_with_heartbeats_between(registry: Registry) -> None:
    store = CountingStore(registry.store)
    cycles: list[tuple[float, int]] = []

    def cycle() -> OodaReport:
        cycles.append((time.monotonic(), store.renewals))
        report = registry.ooda()
        if len(cycles) == 2:
            leader.stop()
        return report

    leader = ScheduleLeader(store, registry.tenant, cycle, 1.0, heartbeat_s=0.05)  # type: ignore[arg-type]
    events = run_leader(leader)
    kinds = [event.kind for _, event in events]
    assert kinds == ["lead", "cycle", "cycle", "stop"]
    led_at = events[0][0]
    assert cycles[0][0] - led_at >= 1.0  # the first cycle one interval after leading
    assert cycles[1][0] - events[1][0] >= 1.0  # the next one an interval after the last
    assert cycles[0][1] >= 3  # the lease renewed at each beat while waiting
    report = events[1][1].report
    assert report is not None and report.cycle_id is not None
    assert events[1][1].detail == (
        f"cycle {report.cycle_id}: {report.tools_analyzed} tools, "
        f"{len(report.findings)} findings, {len(report.acts)} acts"
    )
    assert events[-1][1].detail == f"{leader.holder} stopped"
    taken, _, _ = registry.store.acquire_ooda_lock(leader.key, "next", 60)
    assert taken  # the lease was released on the way out


def test_a_follower_keeps_the_leaders_lease_and_runs_no_cycle(registry: Registry) -> None:
    store = CountingStore(registry.store)
    holder = ScheduleLeader(registry.store, registry.tenant, no_cycle, 3600)
    assert holder._hold_lease()
    follower = ScheduleLeader(store, registry.tenant, no_cycle, 0.05)  # type: ignore[arg-type]
    store.stop_after_acquires = (follower, 4)
    events = run_leader(follower)
    assert [event.kind for _, event in events] == ["follow", "stop"]
    assert store.renewals == 0 and store.acquires == [follower.holder] * 4
    taken, owner, _ = registry.store.acquire_ooda_lock(holder.key, "next", 60)
    assert (taken, owner) == (False, holder.holder)  # still the leader's


def test_a_failed_cycle_is_reported_and_the_schedule_goes_on(registry: Registry) -> None:
    failures = []

    def cycle() -> OodaReport:
        failures.append(time.monotonic())
        if len(failures) == 2:
            leader.stop()
        raise RuntimeError("tenant busy")

    leader = ScheduleLeader(registry.store, registry.tenant, cycle, 0.2, heartbeat_s=0.05)
    events = run_leader(leader)
    assert [(event.kind, event.detail) for _, event in events[1:]] == [
        ("failed", "cycle failed: tenant busy"),
        ("failed", "cycle failed: tenant busy"),
        ("stop", f"{leader.holder} stopped"),
    ]
    assert failures[1] - events[1][0] >= 0.2  # the next try an interval after the failure


def test_a_long_cycle_renews_the_lease_even_past_a_store_error(registry: Registry) -> None:
    store = CountingStore(registry.store)
    seen = []

    def cycle() -> OodaReport:
        store.fail_renewals = store.failed + 1  # the next renewal fails, later ones not
        start = store.renewals
        seen.append(store.wait_renewals(start + 3))  # three beats within the cycle
        seen.append(store.failed)
        beat = [t for t in threading.enumerate() if t.name == "ooda-schedule-lease"]
        seen.append([t.daemon for t in beat])  # named for thread dumps, and a daemon:
        leader.stop()
        return registry.ooda()

    leader = ScheduleLeader(store, registry.tenant, cycle, 0.1, heartbeat_s=0.05)  # type: ignore[arg-type]
    events = run_leader(leader)
    assert seen == [True, 1, [True]]  # a store call hanging at exit keeps no process up
    assert [event.kind for _, event in events] == ["lead", "cycle", "stop"]


def test_a_heartbeat_longer_than_the_interval_holds_no_cycle_back(registry: Registry) -> None:
    """The wait is the heartbeat or the time to the next cycle, whichever is shorter:
    with a 30 s heartbeat and a 0.05 s interval, cycles still come every interval, one
    renewal of the lease apart."""
    store = CountingStore(registry.store)
    renewed_at: list[int] = []

    def cycle() -> OodaReport:
        renewed_at.append(store.renewals)
        if len(renewed_at) == 3:
            leader.stop()
        return registry.ooda()

    leader = ScheduleLeader(store, registry.tenant, cycle, 0.05, heartbeat_s=30)  # type: ignore[arg-type]
    events = run_leader(leader)
    assert [event.kind for _, event in events] == ["lead", "cycle", "cycle", "cycle", "stop"]
    assert renewed_at == [1, 2, 3]  # the lease taken, then one renewal before each cycle
