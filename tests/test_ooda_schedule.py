"""`tooldb ooda schedule --every I` (issue 28.7): OODA on a schedule without a server.
Any number of schedulers may run against one store; exactly one leads and runs the
cycles; when the leader dies (SIGKILL: no chance to release) another takes over
within its lease; a cycle still takes the tenant's own lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tooldb
from tooldb import Registry, UsageError
from tooldb.ooda.leader import Event, ScheduleLeader, parse_interval

ROOT = Path(__file__).resolve().parent.parent


def test_intervals_are_read_with_their_units_and_bad_ones_are_refused() -> None:
    assert parse_interval("90") == 90
    assert parse_interval("90s") == 90
    assert parse_interval("15m") == 900
    assert parse_interval("1h") == 3600
    assert parse_interval("1.5d") == 1.5 * 86400
    for bad in ("0", "0s", "-1h", "1w", "h", "", "1 hour"):
        with pytest.raises(UsageError, match="is not a positive duration"):
            parse_interval(bad)


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
