"""``store.record_calls``: many call records and their counters in one transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import tooldb
from tests import sample_tools
from tooldb import ArgumentError, Registry, Settings, StoreError
from tooldb.agents import AgentLoop, run_task
from tooldb.execution import Outcome
from tooldb.models import ScriptedModel, call
from tooldb.recording import HeldRecords, Recorder
from tooldb.types import ErrorKind, ToolResult

from .ooda_support import tool_spec


def row(registry: Registry, name: str, ok: bool, ms: float, at: float, **extra: Any) -> dict:
    tool = registry.get(name)
    values = {
        "tenant": registry.tenant, "tool_id": tool.id, "tool_name": name, "tool_version": 1,
        "run_id": None, "session_id": "import", "arguments": {"q": "x'; DROP TABLE calls; --"},
        "success": ok, "error_kind": None if ok else "execution",
        "error": None if ok else "bad\ttab\nnewline \\ backslash", "output_size": 3,
        "output_preview": "a\tb", "duration_ms": ms, "started_at": at,
    }  # fmt: skip
    return {**values, **extra}


def test_rows_and_counters_land_together(registry: Registry) -> None:
    registry.add(tool_spec("a"), tool_spec("b"))
    now = time.time()
    rows = [
        row(registry, "a", True, 10.0, now - 3),
        row(registry, "a", False, 30.0, now - 2),
        row(registry, "b", True, 5.0, now - 1),
        row(registry, "b", False, 1.0, now, error_kind="arguments"),  # logged, not counted
    ]
    assert registry.store.record_calls(rows) == 4
    assert registry.store.record_calls([]) == 0
    a, b = registry.get("a").stats, registry.get("b").stats
    assert (a.usage_count, a.success_count, a.total_duration_ms) == (2, 1, 40.0)
    assert a.last_used == pytest.approx(now - 2)
    assert (b.usage_count, b.success_count) == (1, 1)
    logged = registry.calls(limit=10)
    assert len(logged) == 4
    failed = next(c for c in logged if c.tool_name == "a" and not c.success)
    assert failed.error == "bad\ttab\nnewline \\ backslash" and failed.output_preview == "a\tb"
    assert failed.arguments == {"q": "x'; DROP TABLE calls; --"}


def test_a_bad_row_leaves_nothing_behind(registry: Registry) -> None:
    registry.add(tool_spec("a"))
    now = time.time()
    good = row(registry, "a", True, 1.0, now)
    broken = row(registry, "a", True, 1.0, now, tool_name=None)  # NOT NULL
    with pytest.raises(StoreError):
        registry.store.record_calls([good, broken])
    assert registry.store.count_calls(registry.tenant) == 0
    assert registry.get("a").stats.usage_count == 0
    registry.store.record_calls([good])  # the connection is usable afterwards
    assert registry.get("a").stats.usage_count == 1


def test_record_output_chars_bounds_the_stored_preview(store_url: str) -> None:
    settings = Settings(embedder="hash", url=store_url, record_output_chars=5)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(sample_tools.echo)
        result = registry.call("echo", {"text": "héllo, world"})
        assert result.success and result.output == "héllo, world"  # the caller gets it all
        [logged] = registry.calls()
        assert logged.output_preview == "héllo"  # five characters, not bytes
        assert logged.output_size == len("héllo, world".encode())
        registry.call("echo", {"text": "tiny"})
        assert registry.calls()[0].output_preview == "tiny"


def test_a_call_with_a_step_keeps_its_full_result_with_its_record(store_url: str) -> None:
    """What a submitted run's calls keep for a resumed run (workers/durable.py): written
    with the record, by blocking and async tools alike, and also with recording off."""
    import asyncio
    import json

    settings = Settings(embedder="hash", url=store_url, record_output_chars=5)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(sample_tools.echo, sample_tools.sleep_async)
        store, tenant = registry.store, registry.tenant
        echoed = asyncio.run(registry.acall("echo", {"text": "héllo, world"}, run_id="r",
                                            step="call:1"))  # fmt: skip
        slept = asyncio.run(registry.acall("sleep_async", {"seconds": 0}, run_id="r",
                                           step="call:2"))  # fmt: skip
        for key, result in (("call:1", echoed), ("call:2", slept)):
            kept = store.run_step(tenant, "r", key)
            assert kept is not None and kept[0] == result.call_id
            assert json.loads(kept[1] or "")["result"]["output"] == result.output
        assert registry.calls()[-1].output_preview == "héllo"  # the record: its preview
        assert store.run_step(tenant, "r", "call:3") is None
    quiet = Settings(embedder="hash", url=store_url, record_calls=False)
    with tooldb.open(store_url, settings=quiet) as registry:
        asyncio.run(registry.acall("echo", {"text": "unrecorded"}, run_id="r", step="call:3"))
        kept = registry.store.run_step(registry.tenant, "r", "call:3")
        assert kept is not None and kept[0] is None and "unrecorded" in (kept[1] or "")


def test_record_decisions_off_stores_no_selection(store_url: str) -> None:
    settings = Settings(embedder="hash", url=store_url, record_decisions=False)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(sample_tools.add, sample_tools.echo)
        selection = registry.select("add two numbers", k=2, run_id="run-1")
        assert selection.names[0] == "add" and selection.decision_id is None
        routed = run_task(registry, "add 2 and 3")
        assert routed.output == "5"
        assert registry.store.list_decisions(registry.tenant) == []
        # an explicit record=True still records (the setting is only the default)
        forced = registry.select("add two numbers", k=2, record=True)
        assert forced.decision_id is not None
        assert len(registry.store.list_decisions(registry.tenant)) == 1
    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        assert registry.select("add two numbers", k=2).decision_id is not None


_CALLER = """
import sys
import tooldb
from tooldb import Settings
url = sys.argv[1]
registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
registry.add_module("tests.sample_tools")
print("ready", flush=True)
n = 0
while True:
    n += 1
    result = registry.call("add", {"a": n, "b": 0})
    assert result.success and result.output == str(n)
    print(result.call_id, flush=True)  # only once the call has returned
"""


@pytest.mark.postgres
def test_a_returned_call_survives_kill_9_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    """``registry.call`` returns only once its record is committed: a process killed with
    SIGKILL right after loses none of the calls it saw return, and the counters agree
    with the log (rows and counters are one transaction)."""
    from tests.conftest import _truncate_postgres

    _truncate_postgres(postgres_url)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
    child = subprocess.Popen(
        [sys.executable, "-c", _CALLER, postgres_url],
        cwd=root, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(120, child.kill)  # a child that never prints fails, not hangs
    watchdog.start()
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        returned = [int(child.stdout.readline()) for _ in range(40)]
        os.kill(child.pid, signal.SIGKILL)  # mid-stream: the next call may be in flight
        child.wait(timeout=30)
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    with tooldb.open(postgres_url, settings=Settings(embedder="hash", url=postgres_url)) as reg:
        logged = reg.calls(tool="add", limit=1000)
        ids = {c.id for c in logged}
        assert set(returned) <= ids
        by_id = {c.id: c for c in logged}
        assert [by_id[i].arguments for i in returned] == [{"a": n, "b": 0} for n in range(1, 41)]
        stats = reg.get("add").stats
        assert stats.usage_count == len(logged) == stats.success_count
        assert len(logged) in (40, 41)  # at most the one call in flight beyond them


def test_a_call_records_its_arguments_error_and_output_as_given(registry: Registry) -> None:
    """The log keeps what the post-mortem needs: the arguments as sent (raw input that
    is no object kept verbatim under ``_raw``, values JSON cannot hold by their repr), the
    error text, and no preview for an empty output."""
    registry.add(sample_tools.add, sample_tools.fail, sample_tools.noop)
    assert registry.call("add", {"a": 2, "b": 3}).success
    assert not registry.call("fail", {"message": "kaput"}).success
    assert registry.call("noop").success
    for raw in ("{not json", [1, 2]):
        with pytest.raises(ArgumentError):
            registry.call("add", raw)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError):
        registry.call("add", {"a": _Odd()})
    logged = list(reversed(registry.calls(limit=10)))
    assert [c.arguments for c in logged] == [
        {"a": 2, "b": 3}, {"message": "kaput"}, {}, {"_raw": "{not json"}, {"_raw": [1, 2]},
        {"a": "<odd>"},
    ]  # fmt: skip
    assert logged[1].error is not None and "kaput" in logged[1].error
    assert logged[0].output_preview == "5" and logged[0].error is None
    assert logged[2].output_preview is None and logged[2].output_size == 0


def test_an_agent_run_records_its_calls_arguments_through_the_held_path(
    registry: Registry,
) -> None:
    registry.add(sample_tools.add)
    model = ScriptedModel([[call("add", {"a": 1, "b": 2}), call("add", {"a": 3})], "done"])
    result = AgentLoop(registry, model, tools=["add"]).run("add twice")
    logged = registry.calls(run_id=result.run_id)
    assert sorted((c.arguments["a"], c.output_preview) for c in logged) == [(1, "3"), (3, "4")]
    assert {u.call_id for u in result.tool_calls} == {c.id for c in logged}


def test_held_records_commit_a_run_s_messages_and_decisions_without_calls(
    registry: Registry,
) -> None:
    """``HeldRecords`` commits whatever it holds: a run's messages and a selection's
    decision with no call among them are written, and the selection gets its decision
    id at the commit (the hold's size counts every kind, none cancels another)."""
    registry.add(sample_tools.add)
    run_id = uuid.uuid4().hex
    registry.store.create_run(
        {
            "id": run_id, "tenant": registry.tenant, "parent_run_id": None, "agent": None,
            "mode": "llm", "model": None, "task": "t", "metadata": {}, "status": "running",
            "started_at": time.time(), "owner": None, "lease_expires_at": None,
        }
    )  # fmt: skip
    held = HeldRecords(Recorder(registry.store, registry.settings, registry.tenant), limit=4)
    held.hold_messages((run_id, [(0, 0, "user", '{"role": "user", "content": "add"}')]))
    selection = registry.select("add two numbers", k=1, run_id=run_id, hold=held)
    assert len(held) == 2 and selection.decision_id is None  # held, not written yet
    held.commit()
    assert len(held) == 0 and selection.decision_id is not None
    decision = registry.store.get_decision(registry.tenant, selection.decision_id)
    assert decision is not None and decision["run_id"] == run_id
    assert [m["role"] for m in registry.store.run_messages(run_id)] == ["user"]


def test_a_held_call_is_recorded_with_its_arguments_and_gets_its_id(registry: Registry) -> None:
    """The held path records what the call was given: bound arguments as they are, a
    rejected call's arguments as sent (logged, not counted), each result's ``call_id``
    set at the commit."""
    registry.add(sample_tools.add)
    tool = registry.store.get_tool(registry.tenant, "add")
    assert tool is not None
    held = HeldRecords(Recorder(registry.store, registry.settings, registry.tenant), limit=2)
    good = Outcome(ToolResult(success=True, output="3"), None, time.time())
    rejected = Outcome(ToolResult.failure("bad"), ErrorKind.ARGUMENTS, time.time())
    held.hold(tool, {"a": 1, "b": 2}, good, None, None)
    assert good.result.call_id is None
    held.hold(tool, "{not json", rejected, None, None)  # the second call commits both
    logged = {c.id: c for c in registry.calls(limit=10)}
    assert logged[good.result.call_id].arguments == {"a": 1, "b": 2}  # type: ignore[index]
    assert logged[rejected.result.call_id].arguments == {"_raw": "{not json"}  # type: ignore[index]
    stats = registry.get("add").stats
    assert (stats.usage_count, stats.success_count) == (1, 1)


def test_a_kept_step_holds_the_whole_result_and_why_it_failed(registry: Registry) -> None:
    """A submitted run's kept call (workers/durable.py replays it): the whole ToolResult
    but its record's id, values JSON cannot hold by their repr, and the error kind, so a
    replayed rejected call raises ArgumentError again."""
    import asyncio
    import json

    tool, recorder = _add_with_recorder(registry)
    ok = Outcome(ToolResult(success=True, output="3", data=_Odd()), None, time.time())
    recorder.record(tool, {"a": 1, "b": 2}, ok, run_id="r", step="call:1")
    with pytest.raises(ArgumentError):
        asyncio.run(registry.acall("add", {"a": "x"}, run_id="r", step="call:2"))
    kept = [registry.store.run_step(registry.tenant, "r", key) for key in ("call:1", "call:2")]
    first, second = (json.loads(k[1] or "") for k in kept if k is not None)
    assert first == {
        "result": {"success": True, "output": "3", "data": "<odd>", "error": None,
                   "duration_ms": 0.0},
        "error_kind": None,
    }  # fmt: skip
    assert second["error_kind"] == "arguments" and "call_id" not in second["result"]
    assert second["result"]["success"] is False and "'a'" in second["result"]["error"]


def test_arguments_that_bypassed_the_binder_are_still_recorded(registry: Registry) -> None:
    """The recorder stores whatever bound arguments it is handed (a caller of
    ``Recorder`` that skipped the binder): none as none, an object with values JSON
    cannot hold by their repr, anything else under ``_raw``, a value that contains
    itself with a marker."""
    tool, recorder = _add_with_recorder(registry)
    loop: dict[str, Any] = {"a": 1}
    loop["me"] = loop
    chain: list[Any] = [1]
    chain.append(chain)
    given: list[Any] = [None, {"a": _Odd()}, "text", [1, _Odd()], loop, chain]
    for arguments in given:
        outcome = Outcome(ToolResult(success=True, output="3"), None, time.time())
        recorder.record(tool, arguments, outcome)
    logged = list(reversed(registry.calls(limit=10)))
    assert [c.arguments for c in logged] == [
        None, {"a": "<odd>"}, {"_raw": "text"}, {"_raw": [1, "<odd>"]},
        {"a": 1, "me": "<contains itself>"}, {"_raw": [1, "<contains itself>"]},
    ]  # fmt: skip


def test_a_rejected_call_s_non_finite_number_is_recorded_as_its_name(registry: Registry) -> None:
    """Arguments the binder refused are stored as given, made storable: NaN, which
    PostgreSQL's JSON refuses, becomes the text ``nan``."""
    registry.add(sample_tools.add)
    with pytest.raises(ArgumentError):
        registry.call("add", {"a": float("nan")})
    [logged] = registry.calls()
    assert logged.arguments == {"a": "nan"} and logged.error_kind == "arguments"


def test_the_stored_error_is_cut_past_record_output_chars(store_url: str) -> None:
    """An error text of up to ``record_output_chars`` characters is stored whole; a
    longer one is cut there, with a note of its full length."""
    settings = Settings(embedder="hash", url=store_url, record_output_chars=5)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(sample_tools.add)
        tool = registry.store.get_tool(registry.tenant, "add")
        assert tool is not None
        recorder = Recorder(registry.store, registry.settings, registry.tenant)
        for error in ("kaput", "kaput!"):
            failed = Outcome(ToolResult.failure(error), ErrorKind.EXECUTION, time.time())
            recorder.record(tool, {"a": 1}, failed)
        errors = [c.error for c in reversed(registry.calls(limit=2))]
        assert errors == ["kaput", "kaput... [cut: 6 characters in all]"]


class _Odd:
    """A value JSON cannot hold: recorded by its repr."""

    def __repr__(self) -> str:
        return "<odd>"


def _add_with_recorder(registry: Registry) -> tuple[Any, Recorder]:
    """The sample ``add`` tool's stored record and a recorder on the same store."""
    registry.add(sample_tools.add)
    tool = registry.store.get_tool(registry.tenant, "add")
    assert tool is not None
    return tool, Recorder(registry.store, registry.settings, registry.tenant)
