"""The no-LLM router and its argument extraction."""

from __future__ import annotations

import pytest

import tests.sample_tools as st
from tooldb import Registry, UsageError
from tooldb.agents import Router, run_task
from tooldb.agents.extract import extract_arguments
from tooldb.examples import basic
from tooldb.models import ScriptedModel, call
from tooldb.types import RunStatus

ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
    "required": ["a"],
}
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
        "days": {"type": "integer"},
        "alerts": {"type": "boolean"},
    },
    "required": ["city"],
}


@pytest.mark.parametrize(
    ("task", "schema", "expected"),
    [
        ("add 2 and 3", ADD, {"a": 2, "b": 3}),
        ("add b=9 to a = 7", ADD, {"a": 7, "b": 9}),
        ("add -4", ADD, {"a": -4}),
        ("weather for 'Paris' in imperial units for 3 days", WEATHER,
         {"city": "Paris", "units": "imperial", "days": 3}),
        ("city: Berlin, days to 4, alerts true", WEATHER,
         {"city": "Berlin", "days": 4, "alerts": True}),
        ("what is the weather in Rome", WEATHER, {"city": "Rome"}),
        ("units for 3 days in 'Oslo'", WEATHER, {"city": "Oslo", "days": 3}),
    ],
)  # fmt: skip
def test_extraction(task: str, schema: dict[str, object], expected: dict[str, object]) -> None:
    assert extract_arguments(task, schema).arguments == expected


def test_extraction_of_enum_codes_and_number_lists() -> None:
    schema = {
        "type": "object",
        "properties": {
            "value": {"type": "number"},
            "from_unit": {"type": "string", "enum": ["C", "F", "K"]},
            "to_unit": {"type": "string", "enum": ["C", "F", "K"]},
        },
        "required": ["value", "from_unit", "to_unit"],
    }
    got = extract_arguments("turn 100 degrees Celsius into Fahrenheit", schema).arguments
    assert got == {"value": 100, "from_unit": "C", "to_unit": "F"}
    got = extract_arguments("what is -40.5 F in C", schema).arguments
    assert got == {"value": -40.5, "from_unit": "F", "to_unit": "C"}
    numbers = {"type": "object", "properties": {"values": {"type": "array",
               "items": {"type": "number"}}}, "required": ["values"]}  # fmt: skip
    assert extract_arguments("mean of 1, 2.5 and 10", numbers).arguments == {"values": [1, 2.5, 10]}


@pytest.fixture
def examples(registry: Registry) -> Registry:
    registry.add_module("tooldb.examples.basic")
    registry.add(st.echo)
    return registry


def test_router_selects_extracts_runs_and_records(examples: Registry) -> None:
    result = Router(examples).run("convert 100 C to F")
    assert result.status is RunStatus.SUCCESS and result.mode == "router"
    assert result.data == 212.0 and result.output == "212.0"
    assert [u.tool for u in result.tool_calls] == ["convert_temperature"]
    decisions = examples.store.list_decisions(examples.tenant, run_id=result.run_id)
    assert decisions[0]["chosen"] == "convert_temperature"
    stored = examples.store.get_run(examples.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.SUCCESS and stored.mode == "router"
    call_log = examples.calls(run_id=result.run_id)
    assert call_log[0].arguments == {"value": 100, "from_unit": "C", "to_unit": "F"}


def test_router_failure_names_what_is_missing(examples: Registry) -> None:
    result = Router(examples).run("convert the temperature")
    assert result.status is RunStatus.ERROR and result.requires_review
    assert "convert_temperature" in (result.error or "") and "value" in (result.error or "")


def test_router_with_a_model_lets_it_extract_arguments(examples: Registry) -> None:
    model = ScriptedModel([call("convert_temperature", {"value": 0, "from_unit": "C",
                                                        "to_unit": "K"})])  # fmt: skip
    result = Router(examples, model=model).run(
        "convert the temperature of freezing water to kelvin"
    )
    assert result.output == "273.15"
    assert model.requests[0][2].name == "convert_temperature"


def test_run_task_routes_without_a_model_and_loops_with_one(examples: Registry) -> None:
    routed = run_task(examples, "add 2 and 40")
    assert routed.mode == "router" and routed.status is RunStatus.SUCCESS
    assert routed.output == "42" and routed.data == 42
    assert [(u.tool, u.arguments) for u in routed.tool_calls] == [("add", {"a": 2, "b": 40})]
    model = ScriptedModel([call("add", {"a": 2, "b": 40}), "42"])
    result = run_task(examples, "add 2 and 40", model=model)
    assert result.mode == "llm" and result.output == "42"


def test_bad_tasks_are_usage_errors(examples: Registry) -> None:
    with pytest.raises(UsageError):
        Router(examples).run("   ")


def test_basic_examples_still_import() -> None:
    assert callable(basic.convert_temperature)


def test_router_attempts_try_the_next_candidates_only_when_asked(registry: Registry) -> None:
    """The best candidate cannot take arguments from the task: with ``attempts=1`` (the
    default) the router declines, calling nothing and naming the tool and what is
    missing; with ``attempts=2`` the next candidate runs, and the decision records it."""
    registry.add(
        {"name": "forecast_for_city", "target": "tests.sample_tools:add",
         "description": "Weather forecast for a city: rain, wind and temperature.",
         "parameters": {"a": {"type": "integer", "required": True}}},
        {"name": "forecast_here", "target": "tests.sample_tools:echo",
         "description": "Weather forecast where you are.",
         "parameters": {"text": {"type": "string", "default": "sunny here"}}},
        {"name": "unrelated", "target": "tests.sample_tools:noop",
         "description": "Count the words of a document."},
    )  # fmt: skip
    task = "weather forecast for a city, rain, wind and temperature"
    assert registry.select(task, k=3).names[:2] == ["forecast_for_city", "forecast_here"]
    once = Router(registry).run(task)
    assert once.status is RunStatus.ERROR and once.requires_review
    assert once.tool_calls == [] and registry.calls(run_id=once.run_id) == []
    assert once.plan is not None and once.plan["tool"] == "forecast_for_city"
    assert once.plan["missing"] == ["a"] and "forecast_for_city" in (once.error or "")
    twice = Router(registry, attempts=2).run(task)
    assert twice.status is RunStatus.SUCCESS and twice.output == "sunny here"
    assert [(u.tool, u.success) for u in twice.tool_calls] == [("forecast_here", True)]
    decisions = registry.store.list_decisions(registry.tenant, run_id=twice.run_id)
    assert decisions[0]["chosen"] == "forecast_here"
    assert [c.tool_name for c in registry.calls(run_id=twice.run_id)] == ["forecast_here"]
    assert registry.get("forecast_for_city").stats.usage_count == 0
    with pytest.raises(UsageError, match="attempts"):
        Router(registry, attempts=0)


def test_router_runs_several_calls_with_call_many_and_returns_every_result(
    examples: Registry,
) -> None:
    result = Router(examples).run("convert 0, 37 and 100 C to F")
    assert result.status is RunStatus.SUCCESS
    assert [(u.tool, u.arguments["value"], u.success) for u in result.tool_calls] == [
        ("convert_temperature", 0, True), ("convert_temperature", 37, True),
        ("convert_temperature", 100, True),
    ]  # fmt: skip
    assert result.data == [32.0, 98.6, 212.0] and result.output.count("convert_temperature") == 3
    assert len(examples.calls(run_id=result.run_id)) == 3
    assert (
        result.plan is not None and "item 2 of the list" in result.plan["calls"][1]["why"]["value"]
    )


def test_router_declines_without_calling_and_supplied_arguments_complete_the_call(
    registry: Registry,
) -> None:
    registry.add_module("tooldb.examples.planner")
    declined = Router(registry).run("count the days from 2024-01-01")
    assert declined.status is RunStatus.ERROR and declined.requires_review
    assert declined.tool_calls == [] and registry.calls(run_id=declined.run_id) == []
    assert declined.plan is not None and declined.plan["missing"] == ["end"]
    assert declined.plan["tool"] == "days_between" and "'end'" in (declined.error or "")
    shown = registry.store.run_messages(declined.run_id)
    assert any("declined" in (m.get("content") or "") for m in shown)  # the trace says why
    done = Router(registry).run("count the days from 2024-01-01", arguments={"end": "2024-03-01"})
    assert done.status is RunStatus.SUCCESS and done.data == 60
    asked: list[tuple[str, str]] = []

    def ask(tool: str, parameter: str, schema: dict[str, object]) -> object:
        asked.append((tool, parameter))
        return "2024-01-31"

    prompted = Router(registry, ask=ask).run("count the days from 2024-01-01")
    assert asked == [("days_between", "end")] and prompted.data == 30
    refused = Router(registry, ask=lambda *_: None).run("count the days from 2024-01-01")
    assert refused.status is RunStatus.ERROR and refused.tool_calls == []


def test_router_extracts_dates_and_names_and_says_why(registry: Registry) -> None:
    registry.add_module("tooldb.examples.planner")
    result = Router(registry).run("schedule a meeting with Ada Lovelace on March 3, 2025 at 3pm")
    assert result.output == "meeting with Ada Lovelace on 2025-03-03 at 15:00"
    assert result.plan is not None
    why = result.plan["calls"][0]["why"]
    assert (
        "March 3, 2025" in why["day"] and "3pm" in why["time"] and "Ada Lovelace" in why["person"]
    )


def test_supplied_arguments_must_be_a_mapping(examples: Registry) -> None:
    with pytest.raises(UsageError, match="JSON object"):
        Router(examples).run("add 2 and 3", arguments=[1, 2])  # type: ignore[arg-type]
