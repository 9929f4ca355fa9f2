"""Issue 20, items 4-6: arguments the call log cannot store or read back are refused
at binding, before the tool runs; whatever ran is recorded, and the log stays readable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import tooldb
from tooldb import AgentLoop, ArgumentError, Registry, ScriptedModel
from tooldb.models import call

RAN: list[Any] = []


@tooldb.tool
def anything(x: Any = None) -> str:
    """Take any value."""
    RAN.append(x)
    return "ran"


@tooldb.tool
def mapping(x: dict) -> str:  # type: ignore[type-arg]
    """Take an object."""
    RAN.append(x)
    return "ran"


@tooldb.tool
def whole(x: int) -> str:
    """Take an integer."""
    RAN.append(x)
    return "ran"


@pytest.fixture
def reg(registry: Registry) -> Iterator[Registry]:
    for fn in (anything, mapping, whole):
        registry.add(fn)
    RAN.clear()
    yield registry


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return value


HOSTILE = {
    "nested 300 levels, untyped": ("anything", {"x": nested(150)}),
    "nested 300 levels, object": ("mapping", {"x": nested(150)}),
    "lone surrogate in a key": ("mapping", {"x": {"\ud800": 1}}),
    "lone surrogate in a top-level key": ("anything", {"x": 1, "\udfff": 2}),
    "NaN nested": ("anything", {"x": [1, {"y": float("nan")}]}),
    "infinity": ("anything", {"x": float("inf")}),
    "int of 5000 digits": ("whole", {"x": 10**5000}),
    "int of 5000 digits nested": ("anything", {"x": [10**5000]}),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_unstorable_arguments_are_refused_before_the_tool_runs_and_logged(
    reg: Registry, case: str
) -> None:
    name, arguments = HOSTILE[case]
    with pytest.raises(ArgumentError):
        reg.call(name, arguments)
    assert RAN == []  # the tool never ran
    [record] = reg.calls()  # the rejection is in the log, and the log reads back
    assert record.error_kind == "arguments" and not record.success
    json.dumps(record.arguments, allow_nan=False)  # stored as plain JSON
    assert reg.get(name).stats.usage_count == 0


def test_a_rejection_holding_nan_is_recorded_on_every_store(reg: Registry) -> None:
    # PostgreSQL refused this log row (a StoreError naming the store's URL)
    with pytest.raises(ArgumentError, match="unknown parameter 'y'"):
        reg.call("whole", {"x": 1, "y": float("nan"), "z": 10**5000, "\ud800": [nested(300)]})
    [record] = reg.calls()
    assert record.arguments is not None and record.arguments["y"] == "nan"
    assert record.arguments["z"].startswith("<integer of about")


def test_huge_integers_never_break_the_call_log(reg: Registry) -> None:
    with pytest.raises(ArgumentError, match="at most 4000 digits"):
        reg.call("anything", {"x": 10**5000})
    assert reg.call("anything", {"x": 10**3999}).success  # within the bound: stored
    assert [c.success for c in reg.calls()] == [True, False]
    assert reg.calls()[0].arguments == {"x": 10**3999}


def test_a_value_that_contains_itself_is_refused(reg: Registry) -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ArgumentError, match="contains itself"):
        reg.call("anything", {"x": loop})
    assert reg.calls()[0].arguments == {"x": [1, "<contains itself>"]}


def test_an_agent_run_gets_the_refusal_back_and_ends(reg: Registry) -> None:
    model = ScriptedModel([call("anything", {"x": nested(150)}), "gave up"])
    result = AgentLoop(reg, model, tools=["anything"]).run("nest it")
    assert result.status != "running" and result.output == "gave up"
    assert RAN == []
    assert reg.calls()[0].error_kind == "arguments"


def test_the_cli_answers_exit_2_not_a_traceback(store_url: str) -> None:
    from typer.testing import CliRunner

    from tooldb.cli import app

    runner = CliRunner()
    added = runner.invoke(
        app, ["--db", store_url, "add", "python", "tests.security.test_unstorable_arguments"]
    )
    assert added.exit_code == 0, added.output
    deep = json.dumps({"x": nested(150)})
    for name, text in [("anything", deep), ("mapping", '{"x": {"\\ud800": 1}}')]:
        result = runner.invoke(app, ["--db", store_url, "call", name, "--args", text])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: tool ")
    with tooldb.open(store_url) as registry:
        assert [c.error_kind for c in registry.calls()] == ["arguments", "arguments"]


def test_nan_beside_a_huge_integer_is_refused_not_raised() -> None:
    """Found by the fuzz test: a NaN first must not let validation try to show an
    integer past Python's 4,300-digit limit (a bare ValueError from the validator)."""
    from tooldb.binding import Binder, normalize_parameters

    binder = Binder("whole", normalize_parameters({"x": "number", "y": "integer"}))
    with pytest.raises(ArgumentError, match=r"'y\[0\]\[0\]' expected an integer of at most"):
        binder.bind({"x": float("inf"), "y": [[10**5000]]})
