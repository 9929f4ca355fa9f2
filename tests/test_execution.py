"""Execution: timeouts stop tools, async tools run from any caller, results are shaped."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import tooldb
from tests import sample_tools
from tooldb import DefinitionError, ErrorKind, Registry, Returns, Settings, UsageError
from tooldb.execution import render


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add_module("tests.sample_tools")
    return registry


def test_blocking_sync_tool_is_stopped_at_timeout_in_main_thread(reg: Registry) -> None:
    start = time.perf_counter()
    result = reg.call("sleep_sync", {"seconds": 5}, timeout_s=0.3)
    elapsed = time.perf_counter() - start
    assert not result.success and "timed out after 0.3 s" in (result.error or "")
    assert elapsed < 2
    [record] = reg.calls()
    assert record.error_kind is ErrorKind.TIMEOUT and not record.success
    assert reg.get("sleep_sync").stats.usage_count == 1


def test_spinning_tool_that_swallows_exceptions_is_stopped_in_worker_thread(reg: Registry) -> None:
    results = []

    def worker() -> None:
        results.append(reg.call("swallow_everything", {"seconds": 10}, timeout_s=0.3))

    start = time.perf_counter()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    assert time.perf_counter() - start < 3
    assert not results[0].success and "timed out" in (results[0].error or "")


def test_thread_keeps_working_after_a_timeout(reg: Registry) -> None:
    """The stop exception must not leak into later, unrelated code of the same thread."""
    outputs = []

    def worker() -> None:
        reg.call("swallow_everything", {"seconds": 10}, timeout_s=0.2)
        for i in range(200):
            outputs.append(reg.call("add", {"a": i}).data)
        time.sleep(0.3)
        outputs.append("done")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert outputs[-1] == "done" and outputs[:3] == [1, 2, 3]


def test_async_tool_from_sync_call_and_timeout(reg: Registry) -> None:
    assert reg.call("sleep_async", {"seconds": 0.01}).output == "slept"
    start = time.perf_counter()
    result = reg.call("sleep_async", {"seconds": 5}, timeout_s=0.2)
    assert not result.success and time.perf_counter() - start < 2


def test_acall_runs_sync_and_async_tools_concurrently(reg: Registry) -> None:
    async def main() -> list[bool]:
        calls = [reg.acall("sleep_async", {"seconds": 0.3}) for _ in range(5)]
        calls.append(reg.acall("sleep_sync", {"seconds": 0.3}))
        results = await asyncio.gather(*calls)
        return [r.success for r in results]

    start = time.perf_counter()
    assert asyncio.run(main()) == [True] * 6
    assert time.perf_counter() - start < 1.5


def test_acall_timeout_of_sync_tool(reg: Registry) -> None:
    result = asyncio.run(reg.acall("swallow_everything", {"seconds": 10}, timeout_s=0.2))
    assert not result.success and "timed out" in (result.error or "")


def test_per_tool_timeout_and_settings_default(registry: Registry) -> None:
    registry.add(
        {"name": "slow", "target": "tests.sample_tools:sleep_sync", "timeout_s": 0.2,
         "parameters": {"seconds": "float"}}
    )  # fmt: skip
    assert "0.2 s" in (registry.call("slow", {"seconds": 3}).error or "")


def test_a_tool_without_a_timeout_of_its_own_gets_the_settings_default(store_url: str) -> None:
    settings = Settings(embedder="hash", url=store_url, default_timeout_s=0.3)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(sample_tools.sleep_sync)
        assert registry.get("sleep_sync").spec.timeout_s is None
        started = time.perf_counter()
        result = registry.call("sleep_sync", {"seconds": 5})
        assert not result.success and "timed out after 0.3 s" in (result.error or "")
        assert time.perf_counter() - started < 2
        assert registry.calls()[0].error_kind is ErrorKind.TIMEOUT
        # an explicit timeout still wins over the default
        assert "timed out after 0.2 s" in (
            registry.call("sleep_sync", {"seconds": 5}, timeout_s=0.2).error or ""
        )


@pytest.mark.parametrize("bad", [0, -1, -0.5])
def test_a_non_positive_timeout_is_refused(registry: Registry, bad: float) -> None:
    registry.add(sample_tools.sleep_sync)
    with pytest.raises(UsageError, match="timeout must be positive"):
        registry.call("sleep_sync", {"seconds": 0}, timeout_s=bad)
    with pytest.raises(UsageError, match="default_timeout_s"):
        Settings(default_timeout_s=bad)
    with pytest.raises(DefinitionError):
        registry.add({"name": "t", "target": "tests.sample_tools:noop", "timeout_s": bad})
    assert registry.calls() == []


def test_non_serialisable_return_is_rendered(registry: Registry) -> None:
    class Thing:
        def __repr__(self) -> str:
            return "<Thing>"

    def make_thing() -> object:
        """Return an object JSON cannot hold."""
        return {"thing": Thing(), "when": {1, 2}}

    registry.add_function(make_thing)
    result = registry.call("make_thing")
    assert result.success and result.data["thing"] == "<Thing>"


@pytest.mark.parametrize(
    ("value", "returns", "output"),
    [
        (3, Returns.SCALAR, "3"),
        (True, Returns.SCALAR, "true"),
        ("text", Returns.TEXT, "text"),
        (None, Returns.NONE, ""),
        ([{"a": 1}], Returns.TABLE, '[{"a": 1}]'),
        ({"k": "ü"}, Returns.JSON, '{"k": "ü"}'),
    ],
)
def test_render(value: object, returns: Returns, output: str) -> None:
    assert render(value, returns)[0] == output


def test_sample_tools_still_plain_functions() -> None:
    assert sample_tools.add(2, 3) == 5
