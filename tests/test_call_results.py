"""What a call gives back: how results are rendered for a model, how a failure is
worded and kinded, and the caller's mistakes that raise (issue 30: the calls group)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests import sample_tools
from tooldb import ErrorKind, NotFound, Registry, Returns, ToolDisabled, UsageError
from tooldb.errors import ExecutionError, ToolTimeout
from tooldb.execution import _failed, render
from tooldb.executors import Rendered


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
