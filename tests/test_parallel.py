"""Parallel calls: real concurrency, request order, isolation of failures, limits and
cancellation, on both backends (every call is recorded in the registry's log)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

import tooldb
from tooldb import ErrorKind, Registry, Settings, UsageError

from .sample_tools import add, fail, sleep_async, sleep_sync

BATCH = 10
NAP = 0.2


class Gauge:
    """Counts how many calls are inside a tool at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


@pytest.fixture
def reg(registry: Registry) -> Iterator[Registry]:
    for func in (add, fail, sleep_async, sleep_sync):
        registry.add(func)
    yield registry


def _timed(reg: Registry, name: str) -> float:
    started = time.perf_counter()
    results = reg.call_many([(name, {"seconds": NAP})] * BATCH)
    elapsed = time.perf_counter() - started
    assert [r.output for r in results] == ["slept"] * BATCH
    return elapsed


def test_async_tools_run_concurrently(reg: Registry) -> None:
    assert _timed(reg, "sleep_async") < 1.0  # 10 x 0.2 s one after the other would be 2 s


def test_sync_tools_run_in_parallel_threads(reg: Registry) -> None:
    assert _timed(reg, "sleep_sync") < 1.0


def test_sync_tools_get_a_thread_each_up_to_the_limit(reg: Registry) -> None:
    """More than the event loop's default executor (cpu_count + 4 threads) at once."""
    gauge = Gauge()

    @tooldb.tool
    def gauged(seconds: float) -> None:
        """Stay inside for a while."""
        gauge.enter()
        try:
            time.sleep(seconds)
        finally:
            gauge.leave()

    reg.add(gauged)
    reg.call_many([("gauged", {"seconds": 0.3})] * 16, max_parallel_per_tool=16)
    assert gauge.peak == 16


def test_results_keep_request_order(reg: Registry) -> None:
    @tooldb.tool
    async def late_echo(value: int, delay: float) -> int:
        """Answer after ``delay`` seconds."""
        await asyncio.sleep(delay)
        return value

    reg.add(late_echo)
    requests = [("late_echo", {"value": i, "delay": (BATCH - i) * 0.02}) for i in range(BATCH)]
    results = reg.call_many(requests)
    assert [r.data for r in results] == list(range(BATCH))
    call_ids = [r.call_id for r in results]
    assert None not in call_ids and len(set(call_ids)) == BATCH


def test_failures_stay_in_their_slot(reg: Registry) -> None:
    reg.disable("sleep_sync")
    results = reg.call_many(
        [
            ("add", {"a": 1}),
            ("fail", {"message": "only me"}),
            ("missing_tool", {}),
            ("add", {"a": "one"}),
            ("sleep_sync", {"seconds": 0}),
            ("sleep_async", {"seconds": 5}),
            ("add", {"a": 2, "b": 2}),
        ],
        timeout_s=0.3,
    )
    assert [r.success for r in results] == [True, False, False, False, False, False, True]
    assert results[0].data == 2 and results[6].data == 4
    assert results[1].error == "RuntimeError: only me"
    assert results[2].error == "no tool named 'missing_tool' in tenant 'default'"
    assert "parameter 'a'" in (results[3].error or "")
    assert "is disabled" in (results[4].error or "")
    assert "timed out after 0.3 s" in (results[5].error or "")
    kinds = {(c.tool_name, c.error_kind) for c in reg.calls(limit=10)}
    assert kinds == {
        ("add", None), ("fail", ErrorKind.EXECUTION), ("add", ErrorKind.ARGUMENTS),
        ("sleep_async", ErrorKind.TIMEOUT),
    }  # fmt: skip


def test_per_tool_limit_holds(reg: Registry) -> None:
    gauge = Gauge()

    @tooldb.tool
    def gauged(seconds: float) -> None:
        """Stay inside for a while."""
        gauge.enter()
        try:
            time.sleep(seconds)
        finally:
            gauge.leave()

    reg.add(gauged)
    results = reg.call_many([("gauged", {"seconds": 0.05})] * 12, max_parallel_per_tool=3)
    assert all(r.success for r in results)
    assert gauge.peak == 3


def test_global_limit_holds_across_tools(reg: Registry) -> None:
    gauge = Gauge()

    async def inside(seconds: float) -> None:
        gauge.enter()
        try:
            await asyncio.sleep(seconds)
        finally:
            gauge.leave()

    @tooldb.tool
    async def first(seconds: float) -> None:
        """Gauged."""
        await inside(seconds)

    @tooldb.tool
    async def second(seconds: float) -> None:
        """Gauged."""
        await inside(seconds)

    reg.add(first, second)
    requests = [(name, {"seconds": 0.05}) for name in ("first", "second") for _ in range(8)]
    results = reg.call_many(requests, max_parallel=4, max_parallel_per_tool=8)
    assert all(r.success for r in results) and gauge.peak == 4


def test_limits_come_from_settings(store_url: str) -> None:
    gauge = Gauge()

    @tooldb.tool
    def gauged_sync() -> None:
        """Gauged."""
        gauge.enter()
        time.sleep(0.05)
        gauge.leave()

    settings = Settings(url=store_url, max_parallel_calls=5, max_parallel_per_tool=2)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(gauged_sync)
        registry.call_many([("gauged_sync", {})] * 8)
        assert gauge.peak == 2
        with pytest.raises(UsageError, match="max_parallel must be a positive integer"):
            registry.call_many([("gauged_sync", {})], max_parallel=0)


def test_cancellation_records_running_calls_as_cancelled(reg: Registry) -> None:
    async def give_up() -> None:
        requests = [("sleep_async", {"seconds": 30})] * 3 + [("sleep_sync", {"seconds": 2})]
        # long enough for the three to start even on a busy machine (a call given up
        # before it starts is, rightly, never recorded)
        await asyncio.wait_for(reg.acall_many(requests, max_parallel=3), timeout=1.0)

    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        asyncio.run(give_up())
    assert time.perf_counter() - started < 3
    records = reg.calls(limit=10)
    # The three running calls were stopped and recorded; the queued fourth never started.
    assert [(r.tool_name, r.error_kind) for r in records] == [
        ("sleep_async", ErrorKind.CANCELLED)
    ] * 3
    assert all(not r.success and "cancelled by the caller" in (r.error or "") for r in records)
    stats = reg.get("sleep_async").stats
    assert stats.usage_count == 3 and stats.success_count == 0


def test_call_many_from_inside_a_running_loop(reg: Registry) -> None:
    async def inside() -> list[int]:
        return [r.data for r in reg.call_many([("add", {"a": i}) for i in range(5)])]

    assert asyncio.run(inside()) == [1, 2, 3, 4, 5]


def test_malformed_batches_are_refused(reg: Registry) -> None:
    with pytest.raises(UsageError, match="list of"):
        reg.call_many("add")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="request #1 must be a"):
        reg.call_many([("add", {"a": 1}), ("add",)])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="request #0: tool name must be a string"):
        reg.call_many([(3, {})])  # type: ignore[list-item]
    assert reg.call_many([]) == []


# -- SQL tools in parallel, and a cancelled statement really stops (PostgreSQL) ---------------
@pytest.fixture
def pg_reg(postgres_url: str) -> Iterator[Registry]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("TRUNCATE tools, tool_versions, calls RESTART IDENTITY CASCADE")
    with tooldb.open(postgres_url, settings=Settings(url=postgres_url)) as registry:
        registry.add(
            {
                "name": "pg_nap",
                "kind": "sql",
                "target": "SELECT pg_sleep(:seconds)",
                "parameters": {"seconds": "float"},
                "returns": "none",
            }
        )
        yield registry


def test_sql_calls_run_in_parallel(pg_reg: Registry) -> None:
    started = time.perf_counter()
    results = pg_reg.call_many([("pg_nap", {"seconds": NAP})] * 8)
    assert all(r.success for r in results), results
    assert time.perf_counter() - started < 1.0


def _sleeping_backends(url: str) -> int:
    """Statements running in this test's database (it is ours alone), but this one."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_cancelled_sql_statements_stop_on_the_server(pg_reg: Registry, postgres_url: str) -> None:
    async def give_up() -> None:
        requests = [("pg_nap", {"seconds": 30})] * 3
        await asyncio.wait_for(pg_reg.acall_many(requests), timeout=0.5)

    with pytest.raises(TimeoutError):
        asyncio.run(give_up())
    deadline = time.monotonic() + 5
    while _sleeping_backends(postgres_url) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleeping_backends(postgres_url) == 0
    assert [r.error_kind for r in pg_reg.calls(tool="pg_nap")] == [ErrorKind.CANCELLED] * 3


# -- a blocking tool's call is bound, run and recorded in one worker-thread hop ---------------


def test_a_cancelled_blocking_call_is_recorded_once_as_cancelled(reg: Registry) -> None:
    async def give_up() -> None:
        await asyncio.wait_for(reg.acall("sleep_sync", {"seconds": 0.6}), timeout=0.15)

    with pytest.raises(TimeoutError):
        asyncio.run(give_up())
    # Recorded the moment the caller gave up, before the tool itself has finished...
    records = reg.calls(tool="sleep_sync")
    assert [(r.error_kind, r.success) for r in records] == [(ErrorKind.CANCELLED, False)]
    time.sleep(0.8)  # ...and not recorded again when the worker thread finishes it.
    assert len(reg.calls(tool="sleep_sync")) == 1
    assert reg.get("sleep_sync").stats.usage_count == 1


def test_blocking_calls_from_a_loop_bind_run_and_record_once(reg: Registry) -> None:
    async def calls() -> list[tooldb.ToolResult]:
        return [await reg.acall("add", {"a": i, "b": "2"}) for i in range(3)]

    results = asyncio.run(calls())
    assert [r.data for r in results] == [2, 3, 4]
    records = reg.calls(tool="add")
    assert sorted(r.id for r in records) == sorted(r.call_id for r in results)
    with pytest.raises(tooldb.ArgumentError, match="parameter 'a' expected integer"):
        asyncio.run(reg.acall("add", {"a": "x"}))
    assert reg.calls(tool="add", limit=1)[0].error_kind == ErrorKind.ARGUMENTS
