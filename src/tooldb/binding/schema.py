"""Parameter schemas at registration: the compact form of DESIGN §2 normalised to JSON
Schema (Draft 2020-12) and checked once (valid schema, resolvable local ``$ref``,
defaults that satisfy their own schema), so a definition mistake is never reported
later as the caller's mistake. Also the validator class both stages use and how a
value is shown in a message."""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match
from referencing.exceptions import Unresolvable

from ..errors import DefinitionError

_TYPE_ALIASES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "str": {"type": "string"},
    "text": {"type": "string"},
    "varchar": {"type": "string"},
    "nvarchar": {"type": "string"},
    "integer": {"type": "integer"},
    "int": {"type": "integer"},
    "bigint": {"type": "integer"},
    "number": {"type": "number"},
    "float": {"type": "number"},
    "double": {"type": "number"},
    "decimal": {"type": "number"},
    "boolean": {"type": "boolean"},
    "bool": {"type": "boolean"},
    "bit": {"type": "boolean"},
    "array": {"type": "array"},
    "list": {"type": "array"},
    "object": {"type": "object"},
    "dict": {"type": "object"},
    "json": {"type": "object"},
    "null": {"type": "null"},
    "uniqueidentifier": {"type": "string", "format": "uuid"},
    "uuid": {"type": "string", "format": "uuid"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
}
_OBJECT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "description", "title",
    "$defs", "definitions", "$schema", "$id", "patternProperties", "minProperties",
    "maxProperties", "dependentRequired", "examples", "$comment",
}  # fmt: skip
# Keywords whose value maps names to subschemas, and keywords whose value is data.
_SCHEMA_MAPS = {"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}
_DATA_KEYWORDS = {"default", "enum", "const", "examples"}
_MAX_SHOWN = 60


def _is_array(_checker: Any, value: Any) -> bool:
    return isinstance(value, list | tuple)  # Python callers pass tuples for arrays


def _is_number(_checker: Any, value: Any) -> bool:
    finite = not isinstance(value, float) or math.isfinite(value)
    return finite and Draft202012Validator.TYPE_CHECKER.is_type(value, "number")


_Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"array": _is_array, "number": _is_number}
    ),
)


def _validator(schema: Any) -> Any:
    return _Validator(schema, format_checker=_Validator.FORMAT_CHECKER)


#: One validator of the metaschema, reused (``check_schema`` builds one per call); the
#: same class and format checker ``check_schema`` uses.
_META_CLASS = validators.validator_for(_Validator.META_SCHEMA)
_META_VALIDATOR = _META_CLASS(_Validator.META_SCHEMA, format_checker=_META_CLASS.FORMAT_CHECKER)


# -- normalisation (registration time) -------------------------------------------


# -- normalisation (registration time) -------------------------------------------


def normalize_parameters(
    parameters: Mapping[str, Any] | None, *, repairs: list[str] | None = None
) -> dict[str, Any]:
    """Standard JSON Schema or the compact form in; a checked object schema out.

    Given a ``repairs`` list, a parameter's default that does not match its schema is
    coerced losslessly (``"250"`` for an integer) or else dropped, each change noted
    there, instead of failing the definition."""
    if parameters is None or (isinstance(parameters, Mapping) and not parameters):
        schema: dict[str, Any] = {"type": "object", "properties": {}}
    elif not isinstance(parameters, Mapping):
        raise DefinitionError(f"parameters must be an object, got {json_type_name(parameters)}")
    elif _is_standard(parameters):
        schema = {"type": "object", **_normalize_types(copy.deepcopy(dict(parameters)), "")}
    else:
        schema = _from_compact(parameters)
    if schema.get("type") != "object":
        raise DefinitionError(
            f"parameters must describe an object, got type {schema.get('type')!r}"
        )
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)
    _check_schema(schema)
    _check_consistent(schema, repairs)
    return schema


_CHECKED: dict[str, None] = {}  # schemas (as canonical JSON) already found valid
_CHECKED_MAX = 4096


def _check_schema(schema: dict[str, Any]) -> None:
    """Validate against the metaschema once per distinct schema: checking costs about
    a millisecond, and the tools of a bulk import mostly share a handful of schemas."""
    key = json.dumps(schema, sort_keys=True, default=str)
    if key in _CHECKED:
        return
    error = best_match(_META_VALIDATOR.iter_errors(schema))
    if error is not None:
        where = "/".join(str(p) for p in error.path) or "(root)"
        raise DefinitionError(
            f"parameters are not a valid JSON Schema at {where}: {error.message}"
        ) from None
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED[key] = None


def _is_standard(parameters: Mapping[str, Any]) -> bool:
    if isinstance(parameters.get("type"), str):
        return True
    properties = parameters.get("properties")
    return (
        isinstance(properties, Mapping)
        and all(isinstance(sub, Mapping | bool) for sub in properties.values())
        and set(parameters) <= _OBJECT_KEYWORDS
    )


def _from_compact(parameters: Mapping[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in parameters.items():
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, Mapping):
            example = "{'type': 'string'}"
            raise DefinitionError(
                f"parameter {name!r}: expected an object like {example}, got {_shown(spec)}"
            )
        flag = spec.get("required", False)
        if not isinstance(flag, bool | list):
            raise DefinitionError(
                f"parameter {name!r}: 'required' must be true or false, got {flag!r}"
            )
        # A list is the standard keyword of a nested object parameter: it stays.
        kept = {
            k: copy.deepcopy(v) for k, v in spec.items() if k != "required" or isinstance(v, list)
        }
        properties[str(name)] = _normalize_types(kept, f"properties/{name}")
        if flag is True:
            required.append(str(name))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _normalize_types(schema: Any, where: str) -> Any:
    """Map type aliases (``int``, ``uniqueidentifier``...) to JSON Schema, recursively."""
    if isinstance(schema, list):
        return [_normalize_types(item, f"{where}/{i}") for i, item in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {n: _normalize_types(s, f"{where}/{key}/{n}") for n, s in value.items()}
        elif key in _DATA_KEYWORDS:
            out[key] = value
        else:
            out[key] = _normalize_types(value, f"{where}/{key}")
    kind = out.get("type")
    if isinstance(kind, str):
        out.update(_alias(kind, where))
    elif isinstance(kind, list):
        out["type"] = [_alias(k, where)["type"] if isinstance(k, str) else k for k in kind]
    return out


def _alias(kind: str, where: str) -> dict[str, Any]:
    try:
        return dict(_TYPE_ALIASES[kind.strip().lower()])
    except KeyError:
        at = f" at {where.lstrip('/')}" if where else ""
        raise DefinitionError(
            f"unknown parameter type {kind!r}{at} (use one of: {', '.join(sorted(_TYPE_ALIASES))})"
        ) from None


def _check_consistent(schema: dict[str, Any], repairs: list[str] | None = None) -> None:
    """What is valid JSON Schema yet can never bind: a definition error, not a call error."""
    from .runtime import runtime_parameters  # runtime imports this module's neighbours

    runtime_parameters(schema)  # an unknown x-tooldb-context field
    properties = schema["properties"]
    if schema["additionalProperties"] is False:
        undeclared = [n for n in schema.get("required", []) if n not in properties]
        if undeclared:
            raise DefinitionError(
                f"required parameter {undeclared[0]!r} is not declared in properties"
            )
    validator = _validator(schema)
    for ref in _refs(schema):
        if not ref.startswith("#"):
            raise DefinitionError(
                f"$ref {ref!r}: only local references ('#/$defs/...') are supported"
            )
        try:
            validator.evolve(schema={"$ref": ref}).is_valid(None)
        except Unresolvable:
            raise DefinitionError(f"$ref {ref!r} does not resolve within the parameters") from None
    for name, prop in properties.items():
        if isinstance(prop, dict) and "default" in prop:
            errors = list(validator.evolve(schema=prop).iter_errors(prop["default"]))
            if errors and repairs is not None:
                repairs.append(_repair_default(name, prop, validator, errors[0].message))
            elif errors:
                raise DefinitionError(
                    f"parameter {name!r}: default {_shown(prop['default'])} does not match "
                    f"its own schema ({_trim(errors[0].message)})"
                )


def _repair_default(name: str, prop: dict[str, Any], validator: Any, problem: str) -> str:
    """Coerce a parameter's default losslessly to its type, or drop it; says which."""
    given = prop["default"]
    kinds = prop.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    for kind in kinds:
        value = _lossless(given, kind)
        if value is not _NONE and validator.evolve(schema=prop).is_valid(value):
            prop["default"] = value
            return f"parameter {name!r}: default {_shown(given)} coerced to {_shown(value)}"
    del prop["default"]
    return f"parameter {name!r}: default {_shown(given)} dropped ({_trim(problem)})"


_NONE = object()
_INTEGER = re.compile(r"[+-]?[0-9]{1,300}")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _lossless(value: Any, kind: str) -> Any:
    """``value`` as a ``kind`` if it converts without losing anything, else ``_NONE``."""
    if isinstance(value, str):
        text = value.strip()
        if kind == "integer" and _INTEGER.fullmatch(text):
            return int(text)
        if kind == "number" and _NUMBER.fullmatch(text) and len(text) < 300:
            number = float(text)
            if math.isfinite(number):
                return int(text) if _INTEGER.fullmatch(text) else number
        if kind == "boolean" and text.lower() in {"true", "false"}:
            return text.lower() == "true"
    elif kind == "string" and type(value) in (int, float) and math.isfinite(value):
        return str(value)
    elif kind == "integer" and type(value) is float and value.is_integer():
        return int(value)
    return _NONE


def _refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, list):
        for item in schema:
            yield from _refs(item)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                for sub in value.values():
                    yield from _refs(sub)
            elif key not in _DATA_KEYWORDS:
                yield from _refs(value)


# -- binding (call time) ---------------------------------------------------------


# -- how values are shown in messages ------------------------------------------


def json_type_name(value: Any) -> str:
    """The JSON name of a value's type, the vocabulary of every error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else "non-finite number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _described(value: Any, shown: str) -> str:
    """``string "abc"``, ``array [1]``; a bare ``null`` (``null null`` reads as a stutter)."""
    return "null" if value is None else f"{json_type_name(value)} {shown}"


def _shown(value: Any) -> str:
    """A short, safe rendering of what was given (1 MB strings are not echoed)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(value)
        except RecursionError:
            text = f"<deeply nested {json_type_name(value)}>"
    return _trim(text)


def _trim(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"
