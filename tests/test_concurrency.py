"""Concurrent writers and killed processes: no call record is lost, statistics stay exact.

Real processes (``spawn``, so nothing is inherited but the environment) hammer one
registry on each backend; a child killed with SIGKILL right after ``call`` returned
must have left its record and statistics behind.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

import tooldb
from tooldb import Registry, Settings

ROOT = Path(__file__).resolve().parents[1]
PROCESSES = 8
CALLS_PER_PROCESS = 500
FAIL_EVERY = 10  # every 10th call of a worker goes to the tool that always raises


def _plan(worker: int) -> Iterator[tuple[str, dict[str, object]]]:
    for i in range(CALLS_PER_PROCESS):
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            yield "fail", {"message": f"worker {worker} call {i}"}
        else:
            yield "add", {"a": i, "b": worker}


Report = tuple[int, list[int | None], str | None]  # worker, call ids, error


def _worker(url: str, worker: int, start: Barrier, results: Queue[Report]) -> None:
    """One process: open the registry, wait for the others, make every planned call."""
    try:
        registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
        call_ids: list[int | None] = []
        try:
            start.wait(timeout=120)
            for name, arguments in _plan(worker):
                result = registry.call(name, arguments)
                if result.success != (name == "add"):
                    raise AssertionError(f"{name}{arguments} gave {result}")
                call_ids.append(result.call_id)
        finally:
            registry.close()
        results.put((worker, call_ids, None))
    except BaseException as exc:  # report, do not hang the parent
        results.put((worker, [], f"{type(exc).__name__}: {exc}"))


def _run_workers(url: str) -> list[int | None]:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    results: Queue[Report] = context.Queue()
    workers = [
        context.Process(target=_worker, args=(url, n, start, results), daemon=True)
        for n in range(PROCESSES)
    ]
    for process in workers:
        process.start()
    try:
        reports = [results.get(timeout=300) for _ in workers]
    finally:
        for process in workers:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    errors = [f"worker {n}: {error}" for n, _, error in reports if error]
    assert not errors, errors
    return [call_id for _, ids, _ in reports for call_id in ids]


def _assert_exact(registry: Registry, total_calls: int) -> None:
    """Every tool's statistics equal what its call records add up to."""
    usage = 0
    for name in ("add", "fail"):
        records = registry.calls(tool=name, limit=total_calls + 1)
        stats = registry.get(name).stats
        assert stats.usage_count == len(records), name
        assert stats.success_count == sum(record.success for record in records), name
        durations = math.fsum(record.duration_ms for record in records)
        assert math.isclose(stats.total_duration_ms, durations, rel_tol=1e-9, abs_tol=1e-6)
        assert stats.avg_duration_ms is not None
        assert math.isclose(stats.avg_duration_ms, durations / len(records), rel_tol=1e-9)
        assert stats.last_used == max(record.started_at for record in records)
        usage += stats.usage_count
    assert usage == total_calls


def test_processes_leave_every_record_and_exact_statistics(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # spawned workers get this sys.path: tests importable
    total = PROCESSES * CALLS_PER_PROCESS
    failures = PROCESSES * (CALLS_PER_PROCESS // FAIL_EVERY)
    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        registry.add_module("tests.sample_tools")

    started = time.perf_counter()
    call_ids = _run_workers(store_url)
    elapsed = time.perf_counter() - started

    assert len(call_ids) == total and None not in call_ids
    assert len(set(call_ids)) == total
    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        assert registry.store.count_calls(registry.tenant) == total
        recorded = {
            record.id
            for name in ("add", "fail")
            for record in registry.calls(tool=name, limit=total)
        }
        assert recorded == set(call_ids)
        add, fail = registry.get("add").stats, registry.get("fail").stats
        assert add.usage_count + fail.usage_count == total
        assert (add.success_count, fail.success_count) == (total - failures, 0)
        assert fail.usage_count == failures
        _assert_exact(registry, total)
    print(f"\n{total} calls from {PROCESSES} processes: {elapsed:.1f} s")


def test_threads_share_one_registry_exactly(store_url: str) -> None:
    threads, calls = 8, 100
    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        registry.add_module("tests.sample_tools")
        start = threading.Barrier(threads)
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                start.wait(timeout=30)
                for i in range(calls):
                    name = "fail" if i % FAIL_EVERY == FAIL_EVERY - 1 else "add"
                    registry.call(name, {"message": "x"} if name == "fail" else {"a": i})
            except BaseException as exc:
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=120)
        assert not errors, errors
        assert registry.store.count_calls(registry.tenant) == threads * calls
        _assert_exact(registry, threads * calls)


_CHILD = """
import sys
import tooldb

url = sys.argv[1]
registry = tooldb.open(url, settings=tooldb.Settings(embedder="hash", url=url))
i = 0
while True:  # keep calling: the kill may land in the middle of the next call
    result = registry.call("add", {"a": i})
    if i == 0:
        print(result.call_id, flush=True)
    i += 1
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_call_survives_sigkill_right_after_it_returns(sqlite_url: str) -> None:
    with tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url)) as registry:
        registry.add_module("tests.sample_tools")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    confirmed: list[int] = []
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, sqlite_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert child.stdout is not None
        watchdog = threading.Timer(60, child.kill)  # a child that never prints fails, not hangs
        watchdog.start()
        line = child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        watchdog.cancel()
        _, stderr = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, stderr
        assert line.strip().isdigit(), f"child printed {line!r}: {stderr}"
        confirmed.append(int(line))

        with tooldb.open(
            sqlite_url, settings=Settings(embedder="hash", url=sqlite_url)
        ) as registry:
            recorded = {record.id for record in registry.calls(tool="add", limit=1_000_000)}
            assert set(confirmed) <= recorded
            stats = registry.get("add").stats
            # Whatever the kill interrupted was all or nothing: record and count together.
            assert stats.usage_count == len(recorded) >= len(confirmed)
            assert stats.success_count == stats.usage_count


def test_sqlite_record_lock_is_per_file_and_fresh_after_fork(tmp_path: Path) -> None:
    """Threads of one process recording into one SQLite file take turns on a Python
    lock (not SQLite's sleeping busy handler); a fork never inherits it held."""
    from tooldb.stores.sqlite import write_lock

    (tmp_path / "sub").mkdir()
    same = write_lock(str(tmp_path / "a.db"))
    spelled_otherwise = write_lock(str(tmp_path / "sub" / ".." / "a.db"))
    other_file = write_lock(str(tmp_path / "b.db"))
    with same:
        with other_file:  # another file's lock is free
            pass
        taken = threading.Event()

        def take() -> None:
            with spelled_otherwise:
                taken.set()

        waiter = threading.Thread(target=take)
        waiter.start()
        assert not taken.wait(0.2)  # the same file, spelled otherwise: it waits
        pid = os.fork()
        if pid == 0:  # the child takes the lock its parent holds right now
            with same:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    waiter.join(timeout=5)
    assert taken.is_set()
    with write_lock(None):  # in-memory databases need none
        pass
