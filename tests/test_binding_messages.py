"""What binding errors say about nested objects, schema combinators and long lists: a
model fixes its call from the message alone, so each part of it is pinned (these were
the binder's surviving mutants, issue 30)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldb import ArgumentError, Binder, normalize_parameters
from tooldb.binding.binder import MAX_DEPTH


def bind_error(schema: dict[str, Any], raw: Any) -> ArgumentError:
    with pytest.raises(ArgumentError) as info:
        Binder("t", normalize_parameters(schema)).bind(raw)
    return info.value


def obj(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **more}


def test_names_matching_pattern_properties_are_not_unknown_in_a_closed_schema() -> None:
    # JSON Schema: additionalProperties false refuses only names that neither
    # properties nor patternProperties cover (the binder used to refuse x_a as unknown)
    schema = obj(
        {"a": {"type": "integer"}},
        patternProperties={"^x_": {"type": "integer"}},
        additionalProperties=False,
    )
    b = Binder("t", normalize_parameters(schema))
    assert b.bind({"x_a": 1, "a": 2}) == {"x_a": 1, "a": 2}
    assert bind_error(schema, {"x_a": "z"}).problems == [
        "parameter 'x_a' expected integer, got string \"z\""
    ]
    assert bind_error(schema, {"y": 1}).problems == ["unknown parameter 'y' (accepted: 'a')"]


def test_a_nested_missing_field_is_named_by_its_path() -> None:
    error = bind_error(obj({"o": obj({"x": {"type": "integer"}}, required=["x"])}), {"o": {}})
    assert error.problems == ["missing required parameter 'o.x' (integer)"]
    assert (error.parameter, error.expected) == ("o.x", "integer")


def test_a_nested_required_field_without_properties_expects_a_value() -> None:
    error = bind_error(obj({"o": {"type": "object", "required": ["x"]}}), {"o": {}})
    assert error.problems == ["missing required parameter 'o.x' (a value)"]


def test_an_unknown_field_of_a_closed_object_without_properties() -> None:
    schema = obj({"o": {"type": "object", "additionalProperties": False}})
    error = bind_error(schema, {"o": {"z": 1}})
    assert error.problems == ["parameter 'o': unknown field 'z' (accepted: none)"]
    assert error.parameter == "o"


def test_nested_pattern_properties_are_not_unknown_fields() -> None:
    inner = obj({"a": {}}, patternProperties={"^x_": {}}, additionalProperties=False)
    error = bind_error(obj({"o": inner}), {"o": {"x_1": 1, "a": 2, "zz": 3}})
    assert error.problems == ["parameter 'o': unknown field 'zz' (accepted: 'a')"]


def test_an_unknown_field_refused_by_a_top_level_all_of_names_the_arguments() -> None:
    schema = obj(
        {"a": {}, "b": {}}, allOf=[{"properties": {"a": {}}, "additionalProperties": False}]
    )
    error = bind_error(schema, {"a": 1, "b": 2})
    assert error.problems == ["arguments: unknown field 'b' (accepted: 'a')"]
    assert error.parameter == ""


@pytest.mark.parametrize("length", [400, 401])
def test_the_accepted_fields_are_listed_up_to_400_characters(length: int) -> None:
    # 'f00', 'f01', ...: 348 characters, the last name then lengthened
    names = [f"f{i:02d}" for i in range(50)]
    listed = ", ".join(map(repr, names))
    names[-1] += "x" * (length - len(listed))
    listed = ", ".join(map(repr, names))
    assert len(listed) == length
    inner = obj({name: {} for name in names}, additionalProperties=False)
    (problem,) = bind_error(obj({"o": inner}), {"o": {"zz": 1}}).problems
    shown = listed if length <= 400 else f"{listed[:400]}… ({length} chars)"
    assert problem == f"parameter 'o': unknown field 'zz' (accepted: {shown})"


def test_one_of_is_described_by_its_options() -> None:
    schema = obj({"v": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}, required=["v"])
    assert bind_error(schema, {}).problems == ["missing required parameter 'v' (integer or string)"]


def test_enum_and_const_without_a_type_are_described_by_their_values() -> None:
    schema = obj({"c": {"enum": ["red", "green"]}, "k": {"const": 5}}, required=["c", "k"])
    error = bind_error(schema, {})
    assert error.problems == [
        'missing required parameter \'c\' (one of ["red", "green"])',
        "missing required parameter 'k' (5)",
    ]
    assert error.expected == 'one of ["red", "green"]'


def test_a_long_enum_is_shown_cut_once() -> None:
    values = [f"colour-{i}" for i in range(40)]
    text = json.dumps(values)
    error = bind_error(obj({"c": {"enum": values}}, required=["c"]), {})
    assert error.expected == f"one of {text[:60]}… ({len(text)} chars)"


def test_a_json_constant_is_named_in_the_parse_error() -> None:
    error = bind_error(obj({"a": {}}), '{"a": NaN}')
    assert "arguments are not valid JSON (NaN is not a JSON value)" in str(error)


def test_json_text_nested_past_the_parser_says_so() -> None:
    error = bind_error(obj({"d": {}}), "[" * 100_000)
    assert "arguments are not valid JSON (nested too deeply): got " in str(error)


def test_malformed_json_text_is_quoted_with_the_parser_reason() -> None:
    error = bind_error(obj({"d": {}}), '{"d": tru}')
    given = '"{\\"d\\": tru}"'
    assert error.problems == [
        "arguments are not valid JSON (Expecting value: line 1 column 7 (char 6)): "
        f'got {given}; send a JSON object like {{"name": value}}'
    ]
    assert (error.expected, error.given) == ("JSON object", given)


@pytest.mark.parametrize("wrong", [200, 201])
def test_validation_is_cut_only_past_200_errors(wrong: int) -> None:
    schema = obj({"xs": {"type": "array", "items": {"type": "integer"}}})
    problems = bind_error(schema, {"xs": ["a"] * wrong}).problems
    assert len(problems) == 200 + (wrong > 200)
    stopped = "(validation stopped after 200 errors)"
    assert (problems[-1] == stopped) is (wrong > 200)


def test_a_problem_of_the_whole_object_names_the_arguments() -> None:
    error = bind_error(obj({"a": {}}, minProperties=1), {})
    assert error.problems == ["arguments: {} should be non-empty (expected object)"]
    assert error.parameter is None


def test_a_value_outside_a_long_enum_shows_the_enum_cut_once() -> None:
    values = [f"colour-{i}" for i in range(40)]
    text = json.dumps(values)
    error = bind_error(obj({"c": {"enum": values}}), {"c": "zz"})
    assert error.problems == [
        f"parameter 'c' expected one of {text[:60]}… ({len(text)} chars), got \"zz\""
    ]


def test_a_long_validator_message_is_cut_at_200_characters() -> None:
    pattern = "^a" + "b" * 300 + "$"
    error = bind_error(obj({"s": {"type": "string", "pattern": pattern}}), {"s": "zz"})
    message = f'"zz" does not match {pattern!r}'
    assert error.problems == [
        f"parameter 's': {message[:200]}… ({len(message)} chars) (expected string)"
    ]


def test_problems_are_ordered_by_parameter_then_by_keyword() -> None:
    schema = obj(
        {
            "b": {"type": "string", "minLength": 5},
            "a": {"type": "string", "pattern": "^x", "minLength": 5},
        }
    )
    problems = bind_error(schema, {"b": "zz", "a": "zz"}).problems
    assert problems == [
        "parameter 'a': \"zz\" is too short (expected string)",
        "parameter 'a': \"zz\" does not match '^x' (expected string)",
        "parameter 'b': \"zz\" is too short (expected string)",
    ]


def test_a_boolean_sub_schema_is_described_as_a_value() -> None:
    schema = obj({"v": {"anyOf": [{"type": "integer"}, True]}}, required=["v"])
    assert bind_error(schema, {}).problems == [
        "missing required parameter 'v' (integer or a value)"
    ]
    error = bind_error(obj({"a": False}), {"a": 1})
    assert "False schema does not allow 1" in str(error)
    assert error.expected == "a value"


def test_a_binder_made_from_a_raw_schema_follows_json_schema_defaults() -> None:
    # Binder is public: a schema that was not normalised is open and may lack properties
    assert Binder("t", {"type": "object"}).bind({"x": 1}) == {"x": 1}
    assert Binder("t", {"type": "object", "properties": {"a": {}}}).bind({"b": 2}) == {"b": 2}


def test_runtime_parameters_are_filled_and_a_required_one_needs_a_value() -> None:
    schema = obj(
        {
            "run": {"type": "string", "x-tooldb-context": "run_id"},
            "who": {"type": "string", "x-tooldb-context": "tenant"},
        },
        required=["run"],
    )
    b = Binder("t", normalize_parameters(schema))
    assert b.bind({"run": "forged"}, tenant="acme", run_id="r1") == {"run": "r1", "who": "acme"}
    with pytest.raises(ArgumentError) as unfilled:
        b.bind({}, tenant="acme")
    assert unfilled.value.problems == [
        "parameter 'run' is filled by the runtime (x-tooldb-context: run_id), "
        "and this call is not part of a run"
    ]


def test_problems_are_joined_and_cut_after_ten() -> None:
    schema = obj({f"p{i}": {"type": "integer"} for i in range(11)})
    ten = bind_error(schema, {f"p{i}": "x" for i in range(10)})
    assert str(ten).startswith("tool 't': parameter 'p0' expected integer, got string \"x\"; ")
    assert "more problems" not in str(ten) and str(ten).count("; ") == 9
    eleven = bind_error(schema, {f"p{i}": "x" for i in range(11)})
    assert str(eleven).endswith("; ... and 1 more problems")


def test_nesting_is_refused_past_100_levels() -> None:
    def nested(levels: int) -> list[Any]:
        value: list[Any] = []
        for _ in range(levels - 1):
            value = [value]
        return value

    b = Binder("t", normalize_parameters(obj({"d": {}})))
    assert b.bind({"d": nested(99)})  # the arguments object is level 1
    with pytest.raises(ArgumentError, match="nested too deeply \\(over 100 levels\\)"):
        b.bind({"d": nested(100)})


def test_a_value_shared_by_many_names_is_walked_once() -> None:
    shared: list[Any] = [1]
    for _ in range(40):  # 2**40 paths to the innermost list, 41 objects
        shared = [shared, shared]
    b = Binder("t", normalize_parameters(obj({"a": {}, "b": {}, "z": {}})))
    assert b.bind({"a": shared, "b": shared})["a"] is shared
    # a value seen before is skipped, and the walk goes on to the other parameters
    with pytest.raises(ArgumentError, match="'z\\[0\\]' expected an integer of at most 4000"):
        b.bind({"z": [10**5000], "b": shared, "a": shared})


def test_a_value_that_contains_itself_is_named_by_its_parameter() -> None:
    loop: list[Any] = []
    loop.append(loop)
    error = bind_error(obj({"xs": {}}), {"xs": loop})
    assert error.problems == ["parameter 'xs[0]' contains itself"]
    assert error.parameter == "xs"


def test_a_name_holding_a_lone_surrogate_is_refused_where_it_is() -> None:
    top = bind_error(obj({}, additionalProperties=True), {"\ud800": 1})
    assert top.problems == [
        "an argument has a name that is not valid Unicode (a lone surrogate): '\\ud800'"
    ]
    nested = bind_error(obj({"o": {}}), {"o": {"\ud800": 1}})
    assert nested.problems == [
        "parameter 'o' has a name that is not valid Unicode (a lone surrogate): '\\ud800'"
    ]
    assert (nested.parameter, nested.expected) == ("o", "valid Unicode text")
    assert nested.given == "'\\ud800'"


def test_a_schema_that_recurses_past_the_validators_stack_is_a_clear_error() -> None:
    # 12 allOf a level: jsonschema's own recursion runs out before the 100-level limit
    inner: dict[str, Any] = {"$ref": "#/$defs/n"}
    for _ in range(12):
        inner = {"allOf": [inner]}
    schema = obj(
        {"d": {"$ref": "#/$defs/n"}}, **{"$defs": {"n": {"type": "array", "items": inner}}}
    )
    value: list[Any] = []
    for _ in range(97):
        value = [value]
    error = bind_error(schema, {"d": value})
    assert error.problems == ["arguments are nested too deeply"]
    assert error.parameter is None


OPEN = {"type": "object", "additionalProperties": True}


@pytest.mark.parametrize("sign", [1, -1])
def test_an_integer_past_4000_digits_is_refused_with_every_part_named(sign: int) -> None:
    error = bind_error(OPEN, {"i": sign * 10**4000})  # 4001 digits, 13,288 bits
    shown = "an integer of 4000+ digits"
    assert str(error) == (
        f"tool 't': parameter 'i' expected an integer of at most 4000 digits, got {shown}"
    )
    assert (error.parameter, error.expected, error.given) == (
        "i", "integer of at most 4000 digits", shown,
    )  # fmt: skip


def test_an_integer_of_4000_digits_binds() -> None:
    largest = 10**4000 - 1
    bound = Binder("t", normalize_parameters(OPEN)).bind({"i": largest, "j": -largest})
    assert bound == {"i": largest, "j": -largest}


def test_a_non_finite_number_names_what_was_given() -> None:
    error = bind_error(OPEN, {"x": [float("-inf")]})
    assert (error.parameter, error.expected, error.given) == ("x[0]", "finite number", "-Infinity")


def test_a_worse_problem_found_after_a_non_finite_number_wins() -> None:
    """A NaN is left to validation (the type check names it best), but only once the walk
    found nothing the validator cannot take: a value nested too deeply, or too long."""
    deep: list[Any] = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    for worse, text in [
        (deep, "parameter 'b' is nested too deeply (over 100 levels)"),
        (10**4000, "parameter 'b' expected an integer of at most 4000 digits"),
    ]:
        error = bind_error(OPEN, {"a": float("nan"), "b": worse})
        assert str(error).startswith(f"tool 't': {text}"), str(error)
        assert error.parameter == "b"


@pytest.mark.parametrize(
    ("raw", "given", "kind"),
    [(42, "42", "integer"), ([1, 2], "[1, 2]", "array"), (True, "true", "boolean")],
)
def test_arguments_that_are_no_object_are_shown(raw: Any, given: str, kind: str) -> None:
    error = bind_error(OPEN, raw)
    assert str(error) == f"tool 't': arguments must be a JSON object, got {kind} {given}"
    assert (error.expected, error.given) == ("object", given)


def test_a_union_type_with_integer_coerces_integer_text() -> None:
    schema = obj({"n": {"type": ["integer", "null"]}, "f": {"type": ["number", "boolean"]}})
    bound = Binder("t", normalize_parameters(schema)).bind({"n": "5", "f": "true"})
    assert bound == {"n": 5, "f": True}


def test_a_nested_mutable_default_is_a_fresh_copy_for_each_call() -> None:
    schema = obj({"opts": {"type": "object", "default": {"tags": ["a"]}}})
    b = Binder("t", normalize_parameters(schema))
    first = b.bind({})
    first["opts"]["tags"].append("changed")
    assert b.bind({}) == {"opts": {"tags": ["a"]}}


def test_the_accepted_names_of_an_unknown_parameter_error_are_cut_past_400_chars() -> None:
    names = [f"p{i:03d}" for i in range(49)]  # 49 names of 6 chars quoted, ", " between
    listed = ", ".join(repr(n) for n in [*names, "q123456"])
    assert len(listed) == 401
    schema = obj({n: {"type": "integer"} for n in [*names, "q123456"]}, additionalProperties=False)
    error = bind_error(schema, {"zz": 1})
    assert f"(accepted: {listed[:400]}… (401 chars))" in str(error)
    shorter = obj({n: {"type": "integer"} for n in [*names, "q12345"]}, additionalProperties=False)
    assert str(bind_error(shorter, {"zz": 1})).endswith(f"(accepted: {listed[:-2]}')")
