"""What a call gives back: how results are rendered for a model, how a failure is
worded and kinded, and the caller's mistakes that raise (issue 30: the calls group)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from decimal import Decimal
from typing import Any

import pytest

import tooldb
from tests import sample_tools
from tests.test_store_run_rows import new_run
from tooldb import (
    ArgumentError,
    DefinitionError,
    ErrorKind,
    NotFound,
    Registry,
    Returns,
    Settings,
    ToolDisabled,
    UsageError,
    tool,
)
from tooldb.context import current_registry
from tooldb.errors import ExecutionError, ToolTimeout
from tooldb.execution import _failed, render
from tooldb.executors import Rendered
from tooldb.executors.python import PythonExecutor
from tooldb.recording import HeldRecords
from tooldb.types import ToolKind, ToolRecord


@tool
def where(text: str = "") -> dict[str, str]:
    """Which registry's tenant and which thread run this call."""
    return {"text": text, "tenant": current_registry().tenant,
            "thread": threading.current_thread().name}  # fmt: skip


@tool
async def awhere(seconds: float = 0.0) -> dict[str, str]:
    """The tenant of the registry running this call, after a sleep."""
    await asyncio.sleep(seconds)
    return {"tenant": current_registry().tenant}


@tool(returns="scalar")
def amount() -> Any:
    """A scalar that JSON carries as text: shown as its text, not quoted."""
    return Decimal("1.50")


@tool(returns="scalar")
async def aamount() -> Any:
    """``amount`` from a coroutine."""
    return Decimal("2.50")


class Unshowable:
    def __repr__(self) -> str:
        raise ValueError("no repr")


@tool
def unshowable() -> Any:
    """A value with no JSON form and no repr."""
    return Unshowable()


_RUNNING = [0]


@tool
async def gauge() -> int:
    """How many gauge calls run at once, this one included (the peak over a batch)."""
    _RUNNING[0] += 1
    try:
        await asyncio.sleep(0.05)
        return _RUNNING[0]
    finally:
        _RUNNING[0] -= 1


@tool
async def afail(message: str) -> None:
    """Always raise, from a coroutine."""
    raise RuntimeError(message)


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


class Text(str):
    """A str subclass: rendered as the text it is."""


@pytest.mark.parametrize(
    ("value", "returns", "output", "data"),
    [
        ("plain", Returns.JSON, "plain", "plain"),
        (5, Returns.SCALAR, "5", 5),
        (5, Returns.TEXT, "5", 5),
        (5, Returns.JSON, "5", 5),
        (2.5, Returns.SCALAR, "2.5", 2.5),
        (True, Returns.TEXT, "true", True),
        (False, Returns.JSON, "false", False),
        (None, Returns.JSON, "", None),
        ({"b": "é", "a": [1, 2]}, Returns.JSON, '{"b": "é","a": [1,2]}', {"b": "é", "a": [1, 2]}),
        ({"k": 1}, Returns.SCALAR, '{"k": 1}', {"k": 1}),
        ((1, 2), Returns.TABLE, "[1,2]", [1, 2]),
        (Opaque(), Returns.JSON, '"<Opaque>"', "<Opaque>"),
        (Opaque(), Returns.SCALAR, "<Opaque>", "<Opaque>"),
        (Text("sub"), Returns.JSON, "sub", "sub"),
        (Rendered("shown", {"k": Opaque()}), Returns.JSON, "shown", {"k": "<Opaque>"}),
        (Rendered("shown"), Returns.TEXT, "shown", None),
    ],
)
def test_render_gives_a_models_text_and_json_data(
    value: Any, returns: Returns, output: str, data: Any
) -> None:
    assert render(value, returns) == (output, data)


class Failing(ExecutionError):
    def __init__(self, text: str, data: Any) -> None:
        super().__init__(text)
        self.data = data


def test_a_failure_is_worded_and_kinded_by_what_was_raised() -> None:
    timeout = _failed(ToolTimeout("timed out after 1 s"), 0.0, 12.5)
    assert (timeout.result.error, timeout.error_kind) == ("timed out after 1 s", ErrorKind.TIMEOUT)
    assert timeout.started_at == 12.5 and not timeout.result.success
    own = _failed(Failing("status 500", {"status": Opaque()}), 0.0, 0.0)
    assert (own.result.error, own.error_kind) == ("status 500", ErrorKind.EXECUTION)
    assert own.result.data == {"status": "<Opaque>"}
    other = _failed(KeyError("k"), 0.0, 0.0)
    assert (other.result.error, other.error_kind) == ("KeyError: 'k'", ErrorKind.EXECUTION)
    assert other.result.data is None


def test_a_raising_tool_is_a_recorded_failure(registry: Registry) -> None:
    registry.add(sample_tools.fail)
    result = registry.call("fail", {"message": "no disk"})
    assert not result.success and result.error == "RuntimeError: no disk"
    assert result.output == result.error and result.duration_ms >= 0
    [record] = registry.calls()
    assert record.error_kind is ErrorKind.EXECUTION and record.id == result.call_id


def test_the_callers_mistakes_raise_with_what_was_wrong(registry: Registry) -> None:
    registry.add(sample_tools.echo)
    with pytest.raises(UsageError) as not_text:
        registry.call(5, {})  # type: ignore[arg-type]
    assert str(not_text.value) == "tool name must be a string, got int"
    with pytest.raises(NotFound) as missing:
        registry.call("nope")
    assert str(missing.value) == "no tool named 'nope' in tenant 'default'"
    registry.disable("echo")
    with pytest.raises(ToolDisabled) as disabled:
        registry.call("echo", {"text": "x"})
    assert str(disabled.value) == "tool 'echo' is disabled in tenant 'default'"
    with pytest.raises(ToolDisabled):
        asyncio.run(registry.acall("echo", {"text": "x"}))
    with pytest.raises(UsageError) as bad:
        registry.call("nope", timeout_s=0)
    assert "no tool named" in str(bad.value)  # the tool is resolved first
    assert registry.calls() == []


def test_bind_resolves_and_validates_without_running(registry: Registry) -> None:
    registry.add(sample_tools.add)
    bound = registry.bind("add", '{"a": "2"}')
    assert bound.tool.name == "add" and bound.arguments == {"a": 2, "b": 1}
    assert registry.calls() == []


def test_a_new_version_gets_a_new_binder(registry: Registry) -> None:
    registry.add({"name": "t", "target": "tests.sample_tools:echo", "parameters": {"text": "str"}})
    assert registry.call("t", {"text": "a"}).output == "a"
    registry.add({"name": "t", "target": "tests.sample_tools:echo", "parameters": {"text": "int"}})
    result = registry.call("t", {"text": "7"})  # bound by the new schema: 7, not "7"
    assert result.success and result.data == 7


def test_bind_fills_the_callers_tenant(registry: Registry) -> None:
    other = registry.for_tenant("other")
    other.add_module("tests.runtime_tools")
    assert other.bind("note_thought", {"thought": "t"}).arguments["tenant"] == "other"


def test_an_async_tool_runs_on_the_loop_and_is_recorded(registry: Registry) -> None:
    registry.add(awhere)
    registry.add(afail)
    before = time.time()
    result = asyncio.run(registry.acall("awhere", {"seconds": 0.05}))
    assert result.success and result.data == {"tenant": "default"}
    assert result.duration_ms >= 40
    failed = asyncio.run(registry.acall("afail", {"message": "no disk"}))
    assert not failed.success and failed.error == "RuntimeError: no disk"
    ok, bad = registry.calls(limit=2)[::-1]
    assert (ok.id, bad.id) == (result.call_id, failed.call_id)
    assert ok.success and before <= ok.started_at <= time.time()
    assert bad.error_kind is ErrorKind.EXECUTION and bad.error == "RuntimeError: no disk"


def test_an_async_tool_times_out_and_a_cancelled_one_is_recorded(registry: Registry) -> None:
    registry.add(awhere)
    started = time.perf_counter()
    late = asyncio.run(registry.acall("awhere", {"seconds": 10}, timeout_s=0.2))
    assert time.perf_counter() - started < 5
    assert not late.success and "timed out" in (late.error or "")
    assert 150 <= late.duration_ms < 5000
    assert registry.calls(limit=1)[0].error_kind is ErrorKind.TIMEOUT

    async def give_up() -> None:
        await asyncio.wait_for(registry.acall("awhere", {"seconds": 10}), 0.2)

    before = time.time()
    with pytest.raises(TimeoutError):
        asyncio.run(give_up())
    [record] = registry.calls(limit=1)
    assert record.error_kind is ErrorKind.CANCELLED and not record.success
    assert re.fullmatch(r"call of tool 'awhere' was cancelled by the caller after \d+ ms",
                        record.error or "")  # fmt: skip
    assert before <= record.started_at <= time.time() and 150 <= record.duration_ms < 5000


class Also:
    """A RecordAlso that holds nothing and notes what it was told before each run."""

    held: HeldRecords | None = None

    def __init__(self) -> None:
        self.told: list[tuple[str, bool]] = []

    def __call__(self, result: Any) -> None:
        return None

    def before_run(self, tool: ToolRecord, waits: bool) -> None:
        self.told.append((tool.name, waits))


def test_an_inline_call_runs_on_the_calling_thread(registry: Registry) -> None:
    registry.add(where)
    registry.add(awhere)
    registry.add(sample_tools.swallow_everything)
    also = Also()

    async def main() -> list[Any]:
        return [
            await registry.acall("where", {"text": "a"}, inline=True, run_id="r", record_also=also),
            await registry.acall("awhere", {}, inline=True, record_also=also),
            await registry.acall("where", {"text": "b"}),
            await registry.acall("swallow_everything", {"seconds": 10}, inline=True,
                                 timeout_s=0.2),
        ]  # fmt: skip

    here, on_loop, default, late = asyncio.run(main())
    main_thread = threading.current_thread().name
    assert here.data == {"text": "a", "tenant": "default", "thread": main_thread}
    assert on_loop.data == {"tenant": "default"}
    assert default.data["thread"] != main_thread  # not inline unless asked
    assert not late.success and "timed out" in (late.error or "")
    assert also.told == [("where", False), ("awhere", True)]
    assert [c.run_id for c in registry.calls(limit=4)][::-1] == ["r", None, None, None]
    assert registry.calls(limit=4)[-1].id == here.call_id


def test_call_many_passes_its_limits_run_and_timeout_on(registry: Registry) -> None:
    registry.add(gauge)
    registry.add(awhere)
    six = [("gauge", {})] * 6
    assert max(r.data for r in registry.call_many(six)) > 1  # the gauge sees overlap
    assert {r.data for r in registry.call_many(six, max_parallel=1)} == {1}
    assert {r.data for r in registry.call_many(six, max_parallel_per_tool=1)} == {1}
    late, quick = registry.call_many(
        [("awhere", {"seconds": 10}), ("awhere", {})], run_id="r", timeout_s=0.2
    )
    assert not late.success and "timed out" in (late.error or "") and quick.success
    assert {c.run_id for c in registry.calls(run_id="r")} == {"r"}
    assert len(registry.calls(run_id="r")) == 2


def test_acall_keeps_its_run_and_step_on_every_path(registry: Registry) -> None:
    """Blocking and async tools, rejected arguments and a cancelled call: each record
    has the run, and the step key keeps it for a resumed run (workers/durable.py)."""
    registry.add(sample_tools.echo)
    registry.add(awhere)

    async def main() -> tuple[Any, Any]:
        echoed = await registry.acall("echo", {"text": "a"}, run_id="r", step="s1")
        waited = await registry.acall("awhere", {}, run_id="r", step="s2")
        with pytest.raises(ArgumentError):
            await registry.acall("echo", {}, run_id="r", step="s3")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(
                registry.acall("awhere", {"seconds": 10}, run_id="r", step="s4"), 0.2
            )
        return echoed, waited

    echoed, waited = asyncio.run(main())
    records = registry.calls(run_id="r")[::-1]
    assert [c.error_kind for c in records] == [
        None, None, ErrorKind.ARGUMENTS, ErrorKind.CANCELLED
    ]  # fmt: skip
    assert [c.id for c in records[:2]] == [echoed.call_id, waited.call_id]
    for key, record in zip(("s1", "s2", "s3", "s4"), records, strict=True):
        kept = registry.store.run_step(registry.tenant, "r", key)
        assert kept is not None and kept[0] == record.id, key
    kept = registry.store.run_step(registry.tenant, "r", "s2")
    assert kept is not None and json.loads(kept[1] or "")["result"]["data"] == {"tenant": "default"}


def test_a_result_is_rendered_by_the_tools_return_kind_or_fails(registry: Registry) -> None:
    registry.add(amount)
    registry.add(unshowable)
    registry.add(sample_tools.sleep_sync)
    shown = registry.call("amount")
    assert (shown.output, shown.data) == ("1.50", "1.50")
    registry.add(aamount)
    assert asyncio.run(registry.acall("aamount")).output == "2.50"
    slept = registry.call("sleep_sync", {"seconds": 0.05})
    assert 45 <= slept.duration_ms < 5000
    before = time.time()
    bad = registry.call("unshowable")
    assert not bad.success and (bad.error or "").startswith("result cannot be rendered: ")
    assert "no repr" in (bad.error or "") and 0 <= bad.duration_ms < 5000
    [record] = registry.calls(limit=1)
    assert record.error_kind is ErrorKind.EXECUTION and before <= record.started_at <= time.time()


def test_call_records_its_run_and_runs_its_tool_under_its_registry(registry: Registry) -> None:
    registry.add(where)
    other = registry.for_tenant("other")
    other.add(where)
    assert other.call("where", {"text": "x"}, run_id="r").data["tenant"] == "other"
    with pytest.raises(ArgumentError):
        other.call("where", {"text": ["not", "text"]}, run_id="r")
    assert [c.run_id for c in other.calls()] == ["r", "r"]
    assert [c.error_kind for c in other.calls()] == [ErrorKind.ARGUMENTS, None]
    assert "text" in (other.calls()[0].error or "")  # the binder's words, recorded
    assert other.calls()[0].arguments == {"text": ["not", "text"]}  # what was sent
    other.add_module("tests.runtime_tools")
    filled = other.call("note_thought", {"thought": "t"}, run_id="r").data
    assert (filled["tenant"], filled["run_id"]) == ("other", "r")
    filled = asyncio.run(other.acall("note_thought", {"thought": "t"}, run_id="r")).data
    assert (filled["tenant"], filled["run_id"]) == ("other", "r")


class Holding(Also):
    """A RecordAlso that holds records for a group commit, each with a message."""

    def __init__(self, registry: Registry) -> None:
        super().__init__()
        self.held = HeldRecords(registry.recorder, limit=10)

    def __call__(self, result: Any) -> Any:
        return ("r", [(len(self.told), 1, "tool", json.dumps({"content": result.output}))])


def test_an_inline_call_can_be_held_for_a_group_commit(registry: Registry) -> None:
    registry.add(sample_tools.echo)
    registry.add(sample_tools.fail)
    new_run(registry.store, registry.tenant, run_id="r")  # its messages need the run's row
    also = Holding(registry)

    async def main() -> list[Any]:
        return [
            await registry.acall("echo", {"text": "hi"}, inline=True, run_id="r", record_also=also),
            await registry.acall("fail", {"message": "no"}, inline=True, run_id="r",
                                 record_also=also),
        ]  # fmt: skip

    ok, bad = asyncio.run(main())
    with pytest.raises(ArgumentError):  # a rejection is held too, in its place
        asyncio.run(registry.acall("echo", {}, inline=True, run_id="r", record_also=also))
    assert registry.calls() == [] and ok.call_id is None  # held, not yet committed
    assert also.held is not None
    also.held.commit()
    records = registry.calls(run_id="r")[::-1]
    assert [(c.tool_name, c.arguments, c.success, c.error_kind) for c in records] == [
        ("echo", {"text": "hi"}, True, None),
        ("fail", {"message": "no"}, False, ErrorKind.EXECUTION),
        ("echo", {}, False, ErrorKind.ARGUMENTS),
    ]
    assert [ok.call_id, bad.call_id] == [c.id for c in records[:2]]
    assert [m["content"] for m in registry.store.run_messages("r")] == ["hi", bad.output]


def test_a_call_made_for_a_task_is_evidence_for_or_against_its_tool(registry: Registry) -> None:
    registry.add(sample_tools.echo)
    registry.add(sample_tools.fail)
    registry.call("echo", {"text": "x"}, task="repeat a word")
    registry.call("fail", {}, task="break something")
    registry.call("echo", {"text": "y"})  # no task: nothing learned
    assert sorted((r.task, r.tool, r.good, r.bad) for r in registry.evidence()) == [
        ("break something", "fail", 0.0, 1.0),
        ("repeat a word", "echo", 1.0, 0.0),
    ]


def test_a_tool_whose_target_is_gone_fails_as_a_call(
    registry: Registry, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.add({"name": "t", "target": "tests.sample_tools:noop", "parameters": {}})
    monkeypatch.delattr(sample_tools, "noop")  # e.g. a module changed since it was added
    settings = Settings(embedder="hash", url=store_url)
    with tooldb.open(store_url, settings=settings) as fresh:  # nothing resolved yet
        result = fresh.call("t", {})
    assert not result.success and "noop" in (result.error or "")
    assert 0 <= result.duration_ms < 5000


def test_a_kind_this_registry_cannot_execute_is_refused_by_name(registry: Registry) -> None:
    registry.add(sample_tools.echo)
    registry.add({"name": "web", "target": "GET https://example.com/", "kind": "http"})
    only_python = Registry(
        registry.store, registry.settings, executors={ToolKind.PYTHON: PythonExecutor()}
    )
    assert only_python.call("echo", {"text": "x"}).output == "x"
    with pytest.raises(DefinitionError) as refused:
        only_python.call("web", {})
    assert str(refused.value) == (
        "tool kind 'http' cannot be executed by this version of tooldb (available: python)"
    )


def test_an_async_tool_whose_target_is_gone_is_a_recorded_failure(
    registry: Registry, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's preparation (here: importing the target) can fail at call time; on
    the async path that is a failed, recorded call like any other, not a crash."""
    (tmp_path / "vanishing_tools.py").write_text(
        "from tooldb import tool\n\n\n@tool\n"
        "async def vanish(x: int) -> int:\n    '''Return x.'''\n    return x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.add_module("vanishing_tools")
    (tmp_path / "vanishing_tools.py").unlink()
    monkeypatch.delitem(sys.modules, "vanishing_tools")
    fresh = tooldb.open(registry.settings.url, settings=registry.settings)  # nothing cached
    try:
        result = asyncio.run(fresh.acall("vanish", {"x": 1}))
        assert not result.success and "vanishing_tools" in (result.error or "")
        assert 0 <= result.duration_ms < 5000
        [record] = fresh.calls(limit=1)
        assert record.id == result.call_id and record.error_kind is ErrorKind.EXECUTION
    finally:
        fresh.close()
