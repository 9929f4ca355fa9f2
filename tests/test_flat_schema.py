"""The flat-schema fast path may only ever accept what full Draft 2020-12 validation accepts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldb.binding import Binder, normalize_parameters
from tooldb.binding.flat import compile_flat
from tooldb.binding.schema import _validator
from tooldb.errors import ArgumentError

TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
plain = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
)
values = st.one_of(
    plain,
    st.lists(plain, max_size=3),
    st.dictionaries(st.text(max_size=3), plain, max_size=3),
    st.tuples(plain),
)


@st.composite
def flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from("abcde"), unique=True, max_size=4))
    properties: dict[str, Any] = {}
    for name in names:
        kinds = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True))
        prop: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
        if draw(st.booleans()):
            prop["enum"] = draw(st.lists(plain.filter(lambda v: v == v), min_size=1, max_size=4))
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if names:
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True))
    schema["additionalProperties"] = draw(st.booleans())
    return schema


@settings(max_examples=4 * settings.default.max_examples, deadline=None)  # 400; 100 under mutation
@given(flat_schemas(), st.dictionaries(st.sampled_from("abcdef"), values, max_size=5))
def test_fast_acceptance_implies_full_validity(schema: dict[str, Any], args: dict) -> None:
    check = compile_flat(schema)
    assert check is not None
    if check(args):
        assert list(_validator(schema).iter_errors(args)) == []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "format": "uuid"}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}},
        {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "properties": {"a": {"type": "string", "enum": [[1]]}}},
    ],
)
def test_schemas_with_constraints_take_the_full_validator(schema: dict[str, Any]) -> None:
    assert compile_flat(schema) is None


def test_binding_errors_are_unchanged_by_the_fast_path() -> None:
    binder = Binder("add", normalize_parameters({"a": {"type": "int", "required": True}}))
    assert binder.bind({"a": "2"}) == {"a": 2}
    assert binder.bind({"a": 2.0}) == {"a": 2.0}  # JSON Schema: 2.0 is an integer
    with pytest.raises(ArgumentError, match="parameter 'a' expected integer, got boolean true"):
        binder.bind({"a": True})
    with pytest.raises(ArgumentError, match="missing required parameter 'a'"):
        binder.bind({})


def test_non_finite_values_inside_open_parameters_are_still_refused() -> None:
    binder = Binder("t", normalize_parameters({"items": {"type": "array"}}))
    with pytest.raises(ArgumentError, match="expected a finite number"):
        binder.bind({"items": [1.0, float("nan")]})


def test_the_fast_path_checks_enums_with_json_equality() -> None:
    schema = {
        "type": "object",
        "properties": {
            "c": {"type": ["integer", "boolean", "string", "array"], "enum": [True, "x"]}
        },
    }
    check = compile_flat(schema)
    assert check is not None
    assert check({"c": "x"}) and check({"c": True})  # valid calls take the fast path
    assert not check({"c": 1})  # 1 is not true to JSON Schema
    assert not check({"c": ["x"]})  # an array is in no enum of plain values
    b = Binder("t", normalize_parameters(schema))
    for wrong in (1, ["x"]):
        with pytest.raises(ArgumentError):
            b.bind({"c": wrong})


def test_the_fast_path_takes_finite_numbers_only() -> None:
    """A number parameter: integers and finite floats are certainly valid; a boolean is
    not a number to JSON Schema, and a non-finite float is refused by the binder."""
    schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    check = compile_flat(schema)
    assert check is not None
    assert check({"n": 3}) and check({"n": -(2**70)}) and check({"n": 2.5})
    for unsure in (True, False, float("inf"), float("-inf"), float("nan"), "3"):
        assert not check({"n": unsure}), unsure
    b = Binder("t", normalize_parameters(schema))
    assert b.bind({"n": 3}) == {"n": 3}
    for wrong in (True, float("inf"), float("nan")):
        with pytest.raises(ArgumentError):
            b.bind({"n": wrong})


def test_every_keyword_the_fast_path_knows_is_taken() -> None:
    """A schema may use every keyword the fast path knows (and no other) and still be
    checked fast; a missing ``properties`` or ``additionalProperties`` takes JSON
    Schema's defaults (none, and open)."""
    prop = {"type": "string", "enum": ["a", "b"], "description": "d", "title": "t",
            "default": "a", "examples": ["a"], "$comment": "c"}  # fmt: skip
    schema = {"type": "object", "properties": {"s": prop}, "required": ["s"],
              "additionalProperties": False, "description": "d", "title": "t",
              "$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": "c",
              "examples": [{"s": "a"}]}  # fmt: skip
    check = compile_flat(schema)
    assert check is not None and check({"s": "b"})
    assert not check({"s": "c"}) and not check({}) and not check({"s": "a", "x": 1})
    bare = compile_flat({"type": "object"})
    assert bare is not None and bare({"anything": [1, {"goes": True}]})
    open_schema = compile_flat({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert open_schema is not None and open_schema({"a": 1, "other": "x"})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 2},
        {"type": "array", "properties": {"a": {"type": "string"}}, "minProperties": 2},
        {"type": "object", "properties": {"a": {"type": "decimal"}}},
        {"type": "object", "properties": {"a": {"type": ["string", "decimal"]}}},
        {"type": "object", "properties": {"a": {"type": []}}},
        {"type": "object", "properties": {"a": {"type": 5}}},
    ],
)
def test_unknown_keywords_and_types_are_left_to_the_full_validator(schema: dict[str, Any]) -> None:
    assert compile_flat(schema) is None


def test_the_fast_path_checks_an_enum_of_a_single_type_and_takes_every_type_of_a_union() -> None:
    enum = compile_flat({"type": "object", "properties": {"c": {"type": "string", "enum": ["x"]}}})
    assert enum is not None and enum({"c": "x"}) and not enum({"c": "y"})
    union = compile_flat({"type": "object", "properties": {"u": {"type": ["string", "integer"]}}})
    assert union is not None and union({"u": "s"}) and union({"u": 3}) and not union({"u": 1.5})
