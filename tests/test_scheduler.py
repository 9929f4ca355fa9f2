"""The scheduler behind `tooldb mcp --ooda-every`: a real server process runs cycles."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tooldb import UsageError
from tooldb.ooda.scheduler import Every
from tooldb.stores import open_store

from .mcp_support import ROOT, wait_until


def test_every_repeats_survives_errors_and_stops() -> None:
    counter = itertools.count()
    results: list[int] = []
    errors: list[BaseException] = []

    def job() -> int:
        n = next(counter)
        if n == 1:
            raise RuntimeError("boom")
        return n

    with Every(0.02, job, on_result=results.append, on_error=errors.append) as every:
        assert wait_until(lambda: every.runs >= 4, timeout_s=10)
    stopped_at = every.runs
    time.sleep(0.1)
    assert every.runs == stopped_at  # stopped
    assert results[:2] == [0, 2] and [str(e) for e in errors] == ["boom"]
    assert every.failures == 1


def test_every_waits_one_interval_before_the_first_run() -> None:
    runs: list[float] = []
    every = Every(0.3, lambda: runs.append(time.monotonic())).start()
    time.sleep(0.1)
    every.stop()
    assert runs == []


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan")])
def test_every_needs_a_positive_interval(seconds: float) -> None:
    with pytest.raises(UsageError, match="positive interval"):
        Every(seconds, lambda: None)


def test_mcp_server_runs_ooda_cycles_on_a_schedule(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    store.migrate()
    log = tmp_path / "server.log"
    with log.open("w") as errors:
        server = subprocess.Popen(
            [sys.executable, "-m", "tooldb", "--db", store_url, "mcp", "--ooda-every", "1"],
            cwd=str(ROOT), env=dict(os.environ), stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=errors,
        )  # fmt: skip
    try:
        assert wait_until(lambda: len(store.list_cycles("default")) >= 2, timeout_s=60), (
            log.read_text()
        )
    finally:
        store.close()
        assert server.stdin is not None
        server.stdin.close()  # the stdio server ends when its client goes
        server.wait(timeout=30)
    assert server.returncode == 0, log.read_text()
    assert "ooda: cycle" in log.read_text()
