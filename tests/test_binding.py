"""Schema normalisation and argument binding: the contract of DESIGN §2-3.

Binding errors are read by models, so the tests pin their content (tool,
parameter, expected type, what was given) as much as their type.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tooldb import ArgumentError, Binder, DefinitionError, UsageError, normalize_parameters

# max_examples is the profile's: 100 (hypothesis' default), 25 under mutation testing (conftest)
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
MB = "x" * 1_000_000
SQL = "'; DROP TABLE tools; --"


def binder(parameters: dict[str, Any] | None, tool: str = "t") -> Binder:
    return Binder(tool, normalize_parameters(parameters))


def bind_error(b: Binder, raw: Any) -> ArgumentError:
    with pytest.raises(ArgumentError) as info:
        b.bind(raw)
    return info.value


# -- normalize_parameters: compact form ------------------------------------------


def test_compact_form_of_the_design_is_normalised() -> None:
    schema = normalize_parameters(
        {
            "prompt": {"type": "string", "required": True},
            "maxTokens": {"type": "int", "default": 100},
        }
    )
    assert schema == {
        "type": "object",
        "properties": {
            "prompt": {"type": "string"},
            "maxTokens": {"type": "integer", "default": 100},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("int", {"type": "integer"}),
        ("bigint", {"type": "integer"}),
        ("float", {"type": "number"}),
        ("decimal", {"type": "number"}),
        ("bool", {"type": "boolean"}),
        ("bit", {"type": "boolean"}),
        ("str", {"type": "string"}),
        ("nvarchar", {"type": "string"}),
        ("list", {"type": "array"}),
        ("dict", {"type": "object"}),
        ("uniqueidentifier", {"type": "string", "format": "uuid"}),
        ("UniqueIdentifier", {"type": "string", "format": "uuid"}),
        ("datetime", {"type": "string", "format": "date-time"}),
        ("date", {"type": "string", "format": "date"}),
        (" Int ", {"type": "integer"}),
    ],
)
def test_type_aliases(alias: str, expected: dict[str, Any]) -> None:
    assert normalize_parameters({"p": {"type": alias}})["properties"]["p"] == expected


def test_compact_shorthand_string_spec() -> None:
    assert normalize_parameters({"n": "int"})["properties"] == {"n": {"type": "integer"}}


def test_compact_required_false_and_absent_are_optional() -> None:
    schema = normalize_parameters({"a": {"type": "int", "required": False}, "b": {"type": "int"}})
    assert "required" not in schema
    assert schema["properties"]["a"] == {"type": "integer"}


def test_compact_nested_object_keeps_its_standard_required_list() -> None:
    schema = normalize_parameters(
        {
            "o": {
                "type": "object",
                "properties": {"x": {"type": "int"}},
                "required": ["x"],
            },
            "xs": {"type": "list", "items": {"type": "float"}},
        }
    )
    assert schema["properties"]["o"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    }
    assert schema["properties"]["xs"] == {"type": "array", "items": {"type": "number"}}
    assert "required" not in schema


def test_compact_parameters_named_like_keywords() -> None:
    schema = normalize_parameters({"type": {"type": "string"}, "properties": {"type": "object"}})
    assert set(schema["properties"]) == {"type", "properties"}
    assert schema["properties"]["properties"] == {"type": "object"}


def test_compact_keeps_descriptions_enum_and_defaults_verbatim() -> None:
    schema = normalize_parameters(
        {"mode": {"type": "str", "enum": ["int", "float"], "default": "int", "description": SQL}}
    )
    assert schema["properties"]["mode"] == {
        "type": "string",
        "enum": ["int", "float"],
        "default": "int",
        "description": SQL,
    }


# -- normalize_parameters: standard form -----------------------------------------


def test_standard_schema_is_kept_and_closed_by_default() -> None:
    standard = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 1}},
        "required": ["q"],
    }
    schema = normalize_parameters(standard)
    assert schema == {**standard, "additionalProperties": False}
    assert "additionalProperties" not in standard  # the caller's mapping is not mutated


def test_standard_schema_may_stay_open() -> None:
    schema = normalize_parameters({"type": "object", "additionalProperties": True})
    assert schema["additionalProperties"] is True
    assert schema["properties"] == {}


def test_standard_without_type_is_recognised_by_its_properties() -> None:
    schema = normalize_parameters({"properties": {"a": {"type": "int"}}, "required": ["a"]})
    assert schema["type"] == "object"
    assert schema["properties"] == {"a": {"type": "integer"}}
    assert schema["required"] == ["a"]


def test_aliases_are_normalised_inside_standard_schemas() -> None:
    schema = normalize_parameters(
        {
            "type": "object",
            "properties": {
                "id": {"type": "uniqueidentifier"},
                "n": {"type": ["int", "null"]},
                "xs": {"type": "array", "items": {"anyOf": [{"type": "float"}, {"type": "bit"}]}},
            },
            "$defs": {"Id": {"type": "bigint"}},
        }
    )
    props = schema["properties"]
    assert props["id"] == {"type": "string", "format": "uuid"}
    assert props["n"] == {"type": ["integer", "null"]}
    assert props["xs"]["items"]["anyOf"] == [{"type": "number"}, {"type": "boolean"}]
    assert schema["$defs"]["Id"] == {"type": "integer"}


@pytest.mark.parametrize("parameters", [None, {}])
def test_no_parameters(parameters: Any) -> None:
    assert normalize_parameters(parameters) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_normalising_is_idempotent() -> None:
    once = normalize_parameters({"a": {"type": "int", "required": True}, "b": "uuid"})
    assert normalize_parameters(once) == once
    assert normalize_parameters(copy.deepcopy(once)) == once


def test_local_refs_resolve() -> None:
    schema = normalize_parameters(
        {
            "type": "object",
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "int"}}}},
            "properties": {"p": {"$ref": "#/$defs/Point"}},
        }
    )
    assert Binder("t", schema).bind({"p": {"x": 3}}) == {"p": {"x": 3}}
    with pytest.raises(ArgumentError, match=r"parameter 'p\.x' expected integer"):
        Binder("t", schema).bind({"p": {"x": "three"}})


# -- normalize_parameters: definition errors -------------------------------------


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ([], r"parameters must be an object, got array"),
        ("int", r"parameters must be an object, got string"),
        (5, r"parameters must be an object, got integer"),
        ({"a": {"type": "strnig"}}, r"unknown parameter type 'strnig' at properties/a"),
        (
            {"type": "object", "properties": {"a": {"items": {"type": "bogus"}}}},
            r"unknown parameter type 'bogus' at properties/a/items",
        ),
        ({"a": 5}, r"parameter 'a': expected an object like \{'type': 'string'\}, got 5"),
        (
            {"a": {"type": "int", "required": "yes"}},
            r"parameter 'a': 'required' must be true or false",
        ),
        ({"type": "string"}, r"parameters must describe an object, got type 'string'"),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}},
            r"not a valid JSON Schema at properties/a/minimum",
        ),
        (
            {"type": "object", "properties": {}, "required": ["ghost"]},
            r"required parameter 'ghost' is not declared",
        ),
        (
            {"n": {"type": "int", "default": "ten"}},
            r"parameter 'n': default \"ten\" does not match",
        ),
        ({"id": {"type": "uuid", "default": "nope"}}, r"parameter 'id': default \"nope\""),
        (
            {"type": "object", "properties": {"p": {"$ref": "https://example.com/s.json"}}},
            r"only local references",
        ),
        (
            {"type": "object", "properties": {"p": {"$ref": "#/$defs/Missing"}}},
            r"\$ref '#/\$defs/Missing' does not resolve",
        ),
    ],
)
def test_invalid_definitions_are_definition_errors(parameters: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        normalize_parameters(parameters)


def test_unknown_type_error_lists_the_known_types() -> None:
    with pytest.raises(DefinitionError) as info:
        normalize_parameters({"a": {"type": "varchar2"}})
    assert "uniqueidentifier" in str(info.value)
    assert isinstance(info.value, UsageError)


def test_additional_properties_schema_with_required_extra_is_allowed() -> None:
    schema = normalize_parameters(
        {"type": "object", "additionalProperties": {"type": "int"}, "required": ["x"]}
    )
    assert Binder("t", schema).bind({"x": 4}) == {"x": 4}
    with pytest.raises(ArgumentError, match="parameter 'x' expected integer"):
        Binder("t", schema).bind({"x": "4"})  # extras are not coerced


# -- Binder: parsing the arguments -------------------------------------------------


ADD = {"a": {"type": "int", "required": True}, "b": {"type": "int", "default": 1}}


@pytest.mark.parametrize(
    "raw", [{"a": 2}, '{"a": 2}', b'{"a": 2}', bytearray(b'{"a": 2}').decode(), '  {"a": 2}\n']
)
def test_arguments_as_mapping_or_json_text(raw: Any) -> None:
    assert binder(ADD).bind(raw) == {"a": 2, "b": 1}


@pytest.mark.parametrize("raw", [None, "", "   ", b""])
def test_no_arguments(raw: Any) -> None:
    assert binder({"b": {"type": "int", "default": 1}}).bind(raw) == {"b": 1}


@pytest.mark.parametrize(
    "raw",
    [
        "{",
        "{'a': 1}",
        '{"a": 1,}',
        "[1,",
        "nul",
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": 1} trailing',
        b"\xff\xfe{",
        "[" * 100_000,
        "{" + '"a":{' * 50_000,
    ],
)
def test_malformed_json_text(raw: Any) -> None:
    error = bind_error(binder(ADD, "add"), raw)
    text = str(error)
    assert text.startswith("tool 'add': arguments are not valid JSON")
    assert 'send a JSON object like {"name": value}' in text
    assert error.expected == "JSON object"
    assert len(text) < 400


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("null", "null"),
        ("[1, 2]", "array"),
        ("42", "integer"),
        ("4.5", "number"),
        ('"a string"', "string"),
        ("true", "boolean"),
        ([], "array"),
        ([{"a": 1}], "array"),
        ((1, 2), "array"),
        (42, "integer"),
        (4.5, "number"),
        (True, "boolean"),
        (object(), "object"),
    ],
)
def test_top_level_must_be_an_object(raw: Any, kind: str) -> None:
    error = bind_error(binder(ADD, "add"), raw)
    assert f"tool 'add': arguments must be a JSON object, got {kind}" in str(error)
    assert error.tool == "add"
    assert error.expected == "object"


def test_argument_names_must_be_strings() -> None:
    with pytest.raises(ArgumentError, match="argument names must be strings, got 1"):
        binder(ADD).bind({1: 2})


# -- Binder: required, defaults, unknown names ------------------------------------


def test_missing_required_names_parameter_and_type() -> None:
    error = bind_error(binder(ADD, "add"), {"b": 2})
    assert str(error) == "tool 'add': missing required parameter 'a' (integer)"
    assert error.parameter == "a"
    assert error.expected == "integer"


def test_every_missing_required_parameter_is_reported_once() -> None:
    b = binder({"x": {"type": "str", "required": True}, "y": {"type": "uuid", "required": True}})
    error = bind_error(b, {})
    assert error.problems == [
        "missing required parameter 'x' (string)",
        "missing required parameter 'y' (string (uuid))",
    ]


def test_defaults_are_filled_and_copied() -> None:
    b = binder({"tags": {"type": "list", "default": ["a"]}, "n": {"type": "int", "default": 0}})
    first = b.bind({})
    assert first == {"tags": ["a"], "n": 0}
    first["tags"].append("mutated")
    assert b.bind({}) == {"tags": ["a"], "n": 0}
    assert b.bind({"n": 5}) == {"tags": ["a"], "n": 5}


def test_explicit_null_is_not_replaced_by_the_default() -> None:
    error = bind_error(binder(ADD), {"a": 1, "b": None})
    assert "parameter 'b' expected integer, got null" in str(error)


def test_unknown_arguments_are_rejected_by_name() -> None:
    error = bind_error(binder(ADD, "add"), {"a": 1, "c": 3, "d": 4})
    assert error.problems == [
        "unknown parameter 'c' (accepted: 'a', 'b')",
        "unknown parameter 'd' (accepted: 'a', 'b')",
    ]
    assert error.parameter == "c"


def test_unknown_arguments_with_no_parameters() -> None:
    with pytest.raises(ArgumentError, match=r"unknown parameter 'x' \(accepted: none\)"):
        binder(None).bind({"x": 1})


def test_unknown_and_invalid_arguments_are_reported_together() -> None:
    error = bind_error(binder(ADD), {"a": "one", "zzz": 1})
    assert len(error.problems) == 2
    assert "unknown parameter 'zzz'" in error.problems[0]
    assert "parameter 'a' expected integer, got string \"one\"" in error.problems[1]


def test_many_problems_are_capped_in_the_message() -> None:
    error = bind_error(binder(ADD), {"a": 1, **{f"x{i}": i for i in range(50)}})
    assert len(error.problems) == 50
    assert str(error).endswith("... and 40 more problems")


def test_open_schema_accepts_extras_verbatim() -> None:
    b = Binder("t", normalize_parameters({"type": "object", "additionalProperties": True}))
    assert b.bind({"anything": [1, {"x": None}], SQL: SQL}) == {
        "anything": [1, {"x": None}],
        SQL: SQL,
    }


def test_additional_properties_schema_validates_extras() -> None:
    b = Binder(
        "t",
        normalize_parameters(
            {"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}
        ),
    )
    assert b.bind({"x": 1}) == {"x": 1}
    with pytest.raises(ArgumentError, match="parameter 'x' expected integer, got string"):
        b.bind({"x": "one"})


def test_unknown_fields_of_nested_closed_objects() -> None:
    b = binder(
        {
            "o": {
                "type": "object",
                "properties": {"x": {"type": "int"}},
                "additionalProperties": False,
            }
        }
    )
    error = bind_error(b, {"o": {"x": 1, "y": 2}})
    assert error.problems == ["parameter 'o': unknown field 'y' (accepted: 'x')"]


# -- Binder: types and coercion ----------------------------------------------------

TYPED = {
    "s": {"type": "string"},
    "i": {"type": "int"},
    "f": {"type": "float"},
    "b": {"type": "bool"},
    "xs": {"type": "array", "items": {"type": "integer"}},
    "o": {"type": "object", "properties": {"x": {"type": "integer"}}},
    "u": {"type": "uniqueidentifier"},
    "e": {"type": "string", "enum": ["red", "green"]},
    "either": {"type": ["integer", "string"]},
    "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
}


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("i", "42", 42),
        ("i", "-7", -7),
        ("i", "+3", 3),
        ("i", " 42 ", 42),
        ("i", "12345678901234567890123456789012345", 12345678901234567890123456789012345),
        ("f", "2.5", 2.5),
        ("f", "-0.5", -0.5),
        ("f", "1e3", 1000.0),
        ("f", "7", 7),
        ("f", ".5", 0.5),
        ("b", "true", True),
        ("b", "false", False),
        ("b", "TRUE", True),
        ("b", " False ", False),
    ],
)
def test_lossless_coercion(name: str, text: str, value: Any) -> None:
    bound = binder(TYPED).bind({name: text})
    assert bound == {name: value}
    assert type(bound[name]) is type(value)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("i", "2.5", "integer"),
        ("i", "42.0", "integer"),
        ("i", "1e3", "integer"),
        ("i", "", "integer"),
        ("i", "0x10", "integer"),
        ("i", "٤٢", "integer"),  # Arabic-Indic digits
        ("i", "4 2", "integer"),
        ("f", "1_000", "number"),
        ("f", "nan", "number"),
        ("f", "inf", "number"),
        ("f", "-Infinity", "number"),
        ("f", "1e999", "number"),
        ("f", "2,5", "number"),
        ("b", "yes", "boolean"),
        ("b", "1", "boolean"),
        ("b", "t", "boolean"),
    ],
)
def test_lossy_strings_are_rejected(name: str, text: str, expected: str) -> None:
    error = bind_error(binder(TYPED, "typed"), {name: text})
    shown = json.dumps(text, ensure_ascii=False)
    assert str(error) == f"tool 'typed': parameter {name!r} expected {expected}, got string {shown}"
    assert error.parameter == name
    assert error.expected == expected


@pytest.mark.parametrize("text", ["42", "true", "2.5", " padded ", SQL, ""])
def test_strings_for_string_parameters_are_untouched(text: str) -> None:
    assert binder(TYPED).bind({"s": text, "either": text}) == {"s": text, "either": text}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("s", 5, "parameter 's' expected string, got integer 5"),
        ("s", None, "parameter 's' expected string, got null"),
        ("s", ["a"], "parameter 's' expected string, got array [\"a\"]"),
        ("i", True, "parameter 'i' expected integer, got boolean true"),
        ("i", 2.5, "parameter 'i' expected integer, got number 2.5"),
        ("i", {"v": 1}, "parameter 'i' expected integer, got object {\"v\": 1}"),
        ("f", "abc", "parameter 'f' expected number, got string \"abc\""),
        ("f", float("nan"), "parameter 'f' expected number, got non-finite number NaN"),
        ("f", float("inf"), "parameter 'f' expected number, got non-finite number Infinity"),
        ("b", 1, "parameter 'b' expected boolean, got integer 1"),
        ("xs", "1,2", "parameter 'xs' expected array, got string \"1,2\""),
        ("xs", [1, "two"], "parameter 'xs[1]' expected integer, got string \"two\""),
        ("o", [], "parameter 'o' expected object, got array []"),
        ("o", {"x": "y"}, "parameter 'o.x' expected integer, got string \"y\""),
        (
            "u",
            "not-a-uuid",
            "parameter 'u': \"not-a-uuid\" is not a 'uuid' (expected string (uuid))",
        ),
        ("e", "blue", 'parameter \'e\' expected one of ["red", "green"], got "blue"'),
        ("either", 1.5, "parameter 'either' expected integer or string, got number 1.5"),
        ("maybe", "x", "parameter 'maybe': \"x\" is not valid under any of the given schemas"),
    ],
)
def test_wrong_types_name_parameter_expected_and_given(name: str, value: Any, message: str) -> None:
    error = bind_error(binder(TYPED, "typed"), {name: value})
    assert str(error).startswith("tool 'typed': ")
    assert message in str(error)


def test_any_of_expected_is_described() -> None:
    error = bind_error(binder(TYPED), {"maybe": "x"})
    assert "(expected integer or null)" in str(error)


def test_valid_values_of_every_type_bind() -> None:
    values = {
        "s": "text",
        "i": -3,
        "f": 0.25,
        "b": False,
        "xs": [1, 2],
        "o": {"x": 1, "extra": "open"},
        "u": "123e4567-e89b-12d3-a456-426614174000",
        "e": "red",
        "either": "x",
        "maybe": None,
    }
    assert binder(TYPED).bind(values) == values
    assert binder(TYPED).bind(json.dumps(values)) == values


@pytest.mark.parametrize(
    ("value", "path", "shown"),
    [
        (float("nan"), "x", "NaN"),
        ({"y": [1.5, float("-inf")]}, "x.y[1]", "-Infinity"),
        ([[{"z": float("inf")}]], "x[0][0].z", "Infinity"),
    ],
)
def test_non_finite_numbers_are_rejected_even_where_anything_goes(
    value: Any, path: str, shown: str
) -> None:
    b = Binder("t", normalize_parameters({"type": "object", "additionalProperties": True}))
    error = bind_error(b, {"x": value, "ok": [1.5, {"fine": 2}]})
    assert str(error) == f"tool 't': parameter {path!r} expected a finite number, got {shown}"
    assert error.parameter == path


def test_self_referencing_values_do_not_hang() -> None:
    loop: list[Any] = [1.5]
    loop.append(loop)
    b = Binder("t", normalize_parameters({"type": "object", "additionalProperties": True}))
    assert "parameter 'x[1]' contains itself" in str(bind_error(b, {"x": loop}))  # not JSON
    assert "parameter 'xs[1]' contains itself" in str(bind_error(binder(TYPED), {"xs": loop}))


def test_non_finite_number_for_a_number_parameter_is_one_problem() -> None:
    error = bind_error(binder(TYPED), {"f": float("nan")})
    assert error.problems == ["parameter 'f' expected number, got non-finite number NaN"]


def test_tuples_are_arrays_for_python_callers() -> None:
    assert binder(TYPED).bind({"xs": (1, 2)}) == {"xs": (1, 2)}


def test_coercion_is_top_level_only() -> None:
    error = bind_error(binder(TYPED), {"xs": ["1"]})
    assert "parameter 'xs[0]' expected integer, got string \"1\"" in str(error)


# -- Binder: hostile input -----------------------------------------------------------


def test_huge_string_is_not_echoed() -> None:
    error = bind_error(binder(TYPED), {"i": MB})
    assert len(str(error)) < 300
    assert "(1000002 chars)" in str(error)
    assert error.given is not None and len(error.given) < 100


def test_huge_string_in_malformed_json_and_unknown_name_is_not_echoed() -> None:
    assert len(str(bind_error(binder(ADD), "{" + MB))) < 400
    assert len(str(bind_error(binder(ADD), {MB: 1, "a": 1}))) < 300
    assert len(str(bind_error(binder(ADD), MB))) < 400


def test_huge_string_failing_a_keyword_is_not_echoed() -> None:
    b = binder({"s": {"type": "string", "maxLength": 10}})
    error = bind_error(b, {"s": MB})
    assert "is too long (expected string)" in str(error)
    assert len(str(error)) < 300


def test_huge_string_binds_when_valid() -> None:
    assert binder(TYPED).bind({"s": MB})["s"] is MB


def test_deeply_nested_value_gives_an_argument_error() -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    error = bind_error(binder(TYPED), {"s": deep, "i": "1"})
    assert str(error) == "tool 't': parameter 's' is nested too deeply (over 100 levels)"
    assert error.parameter == "s"


def test_huge_array_of_wrong_items_is_reported_in_index_order_and_cut_short() -> None:
    """Validation stops after 200 errors (no wall-time assertion: it fails under load;
    the cut is what keeps it fast)."""
    error = bind_error(binder(TYPED), {"xs": ["a"] * 200_000})
    assert error.parameter == "xs[0]"
    assert [p.split(" ")[1] for p in error.problems[:12]] == [f"'xs[{i}]'" for i in range(12)]
    assert error.problems[-1] == "(validation stopped after 200 errors)"
    assert str(error).endswith("... and 191 more problems")


def test_json_text_nested_just_under_the_parser_limit() -> None:
    depth = 500  # parsed, but past what the call log stores: refused before validation
    error = bind_error(binder(TYPED), '{"s": ' + "[" * depth + "]" * depth + "}")
    assert "parameter 's' is nested too deeply (over 100 levels)" in str(error)
    assert len(str(error)) < 300


HOSTILE_NAMES = ["it's", 'say "hi"', "a;b", SQL, "naïve", "名前", "🔧 tool", "x\\y", "--"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_parameter_names(name: str) -> None:
    b = binder({name: {"type": "int", "required": True}}, tool=name)
    assert b.bind({name: "7"}) == {name: 7}
    assert b.bind(json.dumps({name: 7})) == {name: 7}
    missing = bind_error(b, {})
    assert missing.parameter == name
    assert f"missing required parameter {name!r} (integer)" in str(missing)
    assert str(missing).startswith(f"tool {name!r}: ")
    wrong = bind_error(b, {name: "x"})
    assert wrong.parameter == name
    assert f"parameter {name!r} expected integer" in str(wrong)


@pytest.mark.parametrize("value", [SQL, "Robert'); DROP TABLE students;--", "$(rm -rf /)", "\x00"])
def test_metacharacters_in_values_are_bound_verbatim(value: str) -> None:
    b = binder({"s": {"type": "string", "required": True}, "d": {"type": "str", "default": SQL}})
    assert b.bind({"s": value}) == {"s": value, "d": SQL}
    assert b.bind(json.dumps({"s": value})) == {"s": value, "d": SQL}


def test_argument_error_is_a_retryable_usage_error() -> None:
    error = bind_error(binder(ADD, "add"), {"a": "x"})
    assert isinstance(error, UsageError)
    assert error.retryable is True
    assert error.tool == "add"
    assert error.given == '"x"'


def test_raw_mapping_is_not_mutated() -> None:
    raw = {"a": "2"}
    assert binder(ADD).bind(raw) == {"a": 2, "b": 1}
    assert raw == {"a": "2"}


# -- properties ---------------------------------------------------------------------

SIMPLE_TYPES = ["string", "integer", "number", "boolean"]
TYPED_BINDER = binder(TYPED)
ADD_BINDER = binder(ADD)
INT_AND_NUMBER = binder({"n": {"type": "int", "required": True}, "x": {"type": "number"}})
names = st.text(min_size=1, max_size=12)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def value_of(kind: str) -> st.SearchStrategy[Any]:
    return {
        "string": st.text(max_size=30),
        "integer": st.integers(),
        "number": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
        "boolean": st.booleans(),
    }[kind]


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@functools.cache
def one_parameter(kind: str) -> Binder:
    return binder({"v": {"type": kind}}, tool="p")


def fits(kind: str, value: Any) -> bool:
    """Whether the binder must accept the value for the type (after lossless coercion)."""
    actual = json_type(value)
    if actual == kind or (kind == "number" and actual == "integer"):
        return True
    if isinstance(value, str):
        try:
            one_parameter(kind).bind({"v": value})
        except ArgumentError:
            return False
        return True
    return False


@st.composite
def schemas_and_instances(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A compact schema of simple types, a valid instance, and what bind must return."""
    params = draw(st.dictionaries(names, st.sampled_from(SIMPLE_TYPES), max_size=6))
    compact: dict[str, Any] = {}
    instance: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for name, kind in params.items():
        spec: dict[str, Any] = {"type": kind, "required": draw(st.booleans())}
        if not spec["required"] and draw(st.booleans()):
            spec["default"] = draw(value_of(kind))
        compact[name] = spec
        if spec["required"] or draw(st.booleans()):
            instance[name] = expected[name] = draw(value_of(kind))
        elif "default" in spec:
            expected[name] = spec["default"]
    return compact, instance, expected


@SETTINGS
@given(schemas_and_instances())
def test_valid_instances_bind_to_themselves_plus_defaults(
    case: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
) -> None:
    compact, instance, expected = case
    b = Binder("t", normalize_parameters(compact))
    assert b.bind(instance) == expected
    assert b.bind(json.dumps(instance)) == expected
    assert b.bind(json.dumps(instance).encode()) == expected


@SETTINGS
@given(
    st.sampled_from([*SIMPLE_TYPES, "array", "object", "null"]),
    names.filter(lambda n: len(repr(n)) < 40),
    json_values,
)
def test_wrong_json_types_name_parameter_and_expected_type(
    kind: str, name: str, value: Any
) -> None:
    assume(not fits(kind, value))
    b = Binder("tool", normalize_parameters({name: {"type": kind, "required": True}}))
    with pytest.raises(ArgumentError) as info:
        b.bind({name: value})
    message = str(info.value)
    assert message.startswith("tool 'tool': ")
    assert f"parameter {name!r} expected {kind}, got {json_type(value)}" in message or (
        isinstance(value, float) and f"parameter {name!r} expected {kind}, got number" in message
    )
    assert info.value.parameter == name
    assert info.value.expected == kind


@SETTINGS
@given(st.integers())
def test_integer_text_binds_to_the_integer(number: int) -> None:
    b = INT_AND_NUMBER
    assert b.bind({"n": str(number), "x": str(number)}) == {"n": number, "x": number}
    assert b.bind(json.dumps({"n": str(number)})) == {"n": number}


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_text_binds_to_the_same_float(number: float) -> None:
    bound = INT_AND_NUMBER.bind({"n": 0, "x": repr(number)})
    assert bound["x"] == number
    assert math.copysign(1, bound["x"]) == math.copysign(1, number)


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()))
def test_non_integral_text_never_binds_to_an_integer(number: float) -> None:
    with pytest.raises(ArgumentError, match="parameter 'n' expected integer, got string"):
        INT_AND_NUMBER.bind({"n": repr(number)})


@SETTINGS
@given(st.booleans(), st.sampled_from([str, lambda b: str(b).lower(), lambda b: str(b).upper()]))
def test_boolean_text_binds_to_the_boolean(value: bool, render: Any) -> None:
    assert one_parameter("boolean").bind({"v": render(value)}) == {"v": value}


@SETTINGS
@given(st.text(max_size=40))
def test_strings_for_string_parameters_are_never_changed(text: str) -> None:
    assert one_parameter("string").bind({"v": text}) == {"v": text}


@SETTINGS
@given(json_values | st.dictionaries(st.sampled_from(["s", "i", "f", "b", "xs", "o"]), json_values))
def test_bind_raises_only_argument_errors_for_any_json(raw: Any) -> None:
    b = TYPED_BINDER
    for candidate in (raw, json.dumps(raw)):
        try:
            bound = b.bind(candidate)
        except ArgumentError as error:
            assert str(error).startswith("tool 't': ")
            assert error.problems
        else:
            assert isinstance(bound, dict)
            assert set(bound) <= set(TYPED)


@SETTINGS
@given(st.text(max_size=60) | st.binary(max_size=60))
def test_bind_raises_only_argument_errors_for_any_text(raw: str | bytes) -> None:
    try:
        bound = ADD_BINDER.bind(raw)
    except ArgumentError:
        return
    assert set(bound) == {"a", "b"}


@SETTINGS
@given(st.text(min_size=1, max_size=3000), st.sampled_from(["i", "b", "xs", "o", "e"]))
def test_error_messages_stay_short_whatever_was_given(text: str, name: str) -> None:
    try:
        TYPED_BINDER.bind({name: text})
    except ArgumentError as error:
        assert len(str(error)) < 400
