"""A fast acceptance check for the schemas most tools have: flat objects of plain values.

Full JSON Schema validation (jsonschema, Draft 2020-12) costs 50-70 µs for even a
two-integer tool, most of an agent turn's budget. Most tools take a flat object
of strings, numbers, booleans and enums, where validity is a few ``isinstance``
checks. ``compile_flat`` recognises such a schema and returns a checker that says
True only when the arguments are certainly valid under Draft 2020-12; False
means "not sure", and the binder then runs the full validator, which also
writes the error messages. So this can only make valid calls faster, never let
an invalid one through or change an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

FlatCheck = Callable[[dict[str, Any]], bool]

_TOP_KEYWORDS = {
    "type", "properties", "required", "additionalProperties",
    "description", "title", "$schema", "$comment", "examples",
}  # fmt: skip
_PROPERTY_KEYWORDS = {"type", "enum", "description", "title", "default", "examples", "$comment"}
_PLAIN = (str, int, float, bool, type(None))


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,  # 3.0 is an integer to JSON Schema: the full validator decides
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list | tuple),  # no item schema: any items
    "object": lambda value: isinstance(value, dict),  # no property schema: any members
}


def compile_flat(schema: dict[str, Any]) -> FlatCheck | None:
    """A checker for ``schema`` if it is flat enough to check exactly, else None."""
    if schema.get("type") != "object" or not set(schema) <= _TOP_KEYWORDS:
        return None
    extra = schema.get("additionalProperties", True)
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(extra, bool) or not isinstance(properties, dict):
        return None
    tests: dict[str, Callable[[Any], bool]] = {}
    for name, prop in properties.items():
        test = _property_test(prop)
        if test is None:
            return None
        tests[name] = test

    def check(arguments: dict[str, Any]) -> bool:
        for name in required:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            test = tests.get(name)
            if test is None:
                if not extra:
                    return False
            elif not test(value):
                return False
        return True

    return check


def _property_test(prop: Any) -> Callable[[Any], bool] | None:
    if not isinstance(prop, dict) or not set(prop) <= _PROPERTY_KEYWORDS:
        return None
    kinds = prop.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(kinds, list) or not kinds or any(k not in _TYPE_TESTS for k in kinds):
        return None
    type_tests = [_TYPE_TESTS[k] for k in kinds]
    enum = prop.get("enum")
    if enum is not None and not (
        isinstance(enum, list) and all(isinstance(item, _PLAIN) for item in enum)
    ):
        return None

    if enum is None and len(type_tests) == 1:
        return type_tests[0]  # the usual property: one type, any value of it

    def test(value: Any) -> bool:
        if not any(type_test(value) for type_test in type_tests):
            return False
        return enum is None or _in_enum(value, enum)

    return test


def _in_enum(value: Any, enum: list[Any]) -> bool:
    """JSON Schema equality: ``true`` is not ``1``, ``1`` equals ``1.0``."""
    if not isinstance(value, _PLAIN):
        return False
    value_is_bool = isinstance(value, bool)
    return any(item == value and isinstance(item, bool) == value_is_bool for item in enum)
