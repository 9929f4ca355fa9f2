"""Binding: turn raw arguments into validated, completed keyword arguments.

Parameters are stored as JSON Schema (Draft 2020-12). The compact form of
DESIGN §2 is normalised here once, at registration. At call time the binder:

1. parses the arguments (a JSON text or a mapping) into an object;
2. rejects unknown names (unless the schema sets ``additionalProperties``);
3. coerces strings that hold a value *losslessly* — ``"42"`` for an integer,
   ``"2.5"`` for a number, ``"true"``/``"false"`` for a boolean — and nothing else;
4. fills defaults of missing parameters;
5. validates, reporting every problem with the parameter, the expected type and
   what was given, so a model can fix its call from the message alone.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from .errors import ArgumentError, DefinitionError

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
_INTEGER_TEXT = re.compile(r"[+-]?\d{1,30}")
_MAX_SHOWN = 60


def normalize_parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Standard JSON Schema or the compact form in; a checked object schema out."""
    if not parameters:
        schema: dict[str, Any] = {"type": "object", "properties": {}}
    elif not isinstance(parameters, Mapping):
        raise DefinitionError(f"parameters must be an object, got {type(parameters).__name__}")
    elif _is_standard(parameters):
        schema = _normalize_types(copy.deepcopy(dict(parameters)))
    else:
        schema = _from_compact(parameters)
    if schema.get("type") != "object":
        raise DefinitionError(f"parameters must describe an object, got type {schema.get('type')!r}")
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise DefinitionError(f"parameters are not a valid JSON Schema at {where}: {exc.message}") from None
    return schema


def _is_standard(parameters: Mapping[str, Any]) -> bool:
    if isinstance(parameters.get("type"), str):
        return True
    return isinstance(parameters.get("properties"), Mapping) and set(parameters) <= _OBJECT_KEYWORDS


def _from_compact(parameters: Mapping[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in parameters.items():
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, Mapping):
            raise DefinitionError(
                f"parameter {name!r}: expected an object like {{'type': 'string'}}, got {spec!r}"
            )
        prop = _normalize_types({k: copy.deepcopy(v) for k, v in spec.items() if k != "required"})
        if spec.get("required") is True:
            required.append(str(name))
        properties[str(name)] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _normalize_types(schema: Any) -> Any:
    """Map type aliases (``int``, ``uniqueidentifier``...) to JSON Schema, recursively."""
    if isinstance(schema, list):
        return [_normalize_types(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in {"properties", "$defs", "definitions", "patternProperties"} and isinstance(
            value, dict
        ):
            out[key] = {name: _normalize_types(sub) for name, sub in value.items()}
        elif key in {"default", "enum", "const", "examples"}:
            out[key] = value
        else:
            out[key] = _normalize_types(value)
    kind = out.get("type")
    if isinstance(kind, str):
        out.update(_alias(kind))
    elif isinstance(kind, list):
        mapped = [_alias(k)["type"] if isinstance(k, str) else k for k in kind]
        out["type"] = mapped
    return out


def _alias(kind: str) -> dict[str, Any]:
    try:
        alias = _TYPE_ALIASES[kind.strip().lower()]
    except KeyError:
        raise DefinitionError(
            f"unknown parameter type {kind!r} (use one of: {', '.join(sorted(_TYPE_ALIASES))})"
        ) from None
    return dict(alias)


class Binder:
    """Validates arguments against one schema; built once per tool version."""

    def __init__(self, tool: str, schema: dict[str, Any]) -> None:
        self.tool = tool
        self.schema = schema
        self.properties: dict[str, Any] = schema.get("properties", {})
        self.closed = schema.get("additionalProperties", True) is False
        self._validator = Draft202012Validator(schema)

    def bind(self, raw: Any) -> dict[str, Any]:
        """Return completed keyword arguments, or raise ArgumentError naming every problem."""
        arguments = self._parse(raw)
        self._reject_unknown(arguments)
        arguments = {name: self._coerce(name, value) for name, value in arguments.items()}
        for name, prop in self.properties.items():
            if name not in arguments and isinstance(prop, dict) and "default" in prop:
                arguments[name] = copy.deepcopy(prop["default"])
        problems = [
            self._describe(error)
            for error in sorted(self._validator.iter_errors(arguments), key=_error_order)
        ]
        if problems:
            self._fail(problems)
        return arguments

    def _parse(self, raw: Any) -> dict[str, Any]:
        if raw is None:
            return {}
        if isinstance(raw, str | bytes):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except (ValueError, UnicodeDecodeError) as exc:
                raise ArgumentError(
                    f"tool {self.tool!r}: arguments are not valid JSON ({exc}); "
                    "send a JSON object like {\"name\": value}",
                    tool=self.tool,
                    expected="JSON object",
                    given=_shown(raw),
                ) from None
        if not isinstance(raw, Mapping):
            raise ArgumentError(
                f"tool {self.tool!r}: arguments must be a JSON object, got {_type_name(raw)}",
                tool=self.tool,
                expected="object",
                given=_shown(raw),
            )
        bad_keys = [key for key in raw if not isinstance(key, str)]
        if bad_keys:
            self._fail([f"argument names must be strings, got {_shown(bad_keys[0])}"])
        return dict(raw)

    def _reject_unknown(self, arguments: dict[str, Any]) -> None:
        if not self.closed:
            return
        unknown = [name for name in arguments if name not in self.properties]
        if unknown:
            accepted = ", ".join(repr(n) for n in self.properties) or "none"
            self._fail(
                [f"unknown parameter {_trim(repr(name))} (accepted: {accepted})" for name in unknown],
                parameter=unknown[0],
            )

    def _coerce(self, name: str, value: Any) -> Any:
        prop = self.properties.get(name)
        if not isinstance(value, str) or not isinstance(prop, dict):
            return value
        kinds = prop.get("type")
        kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
        if "string" in kinds:
            return value
        text = value.strip()
        for kind in kinds:
            if kind == "integer" and _INTEGER_TEXT.fullmatch(text):
                return int(text)
            if kind == "number":
                number = _parse_number(text)
                if number is not None:
                    return number
            if kind == "boolean" and text.lower() in {"true", "false"}:
                return text.lower() == "true"
        return value

    def _describe(self, error: ValidationError) -> str:
        path = _path(error)
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else error.message
            full = f"{path}.{missing}" if path else missing
            expected = _expected(self._sub_schema(error.schema, missing))
            return f"missing required parameter {full!r} ({expected})"
        if error.validator == "additionalProperties":
            return f"{'parameter ' + repr(path) + ': ' if path else ''}{error.message}"
        where = f"parameter {path!r}" if path else "arguments"
        schema = error.schema if isinstance(error.schema, dict) else {}
        if error.validator == "type":
            return f"{where} expected {_expected(schema)}, got {_type_name(error.instance)} {_shown(error.instance)}"
        if error.validator == "enum":
            return f"{where} expected one of {schema.get('enum')}, got {_shown(error.instance)}"
        return f"{where}: {_trim(error.message)} (expected {_expected(schema)})"

    @staticmethod
    def _sub_schema(schema: Any, name: str) -> dict[str, Any]:
        if isinstance(schema, dict):
            sub = schema.get("properties", {}).get(name)
            if isinstance(sub, dict):
                return sub
        return {}

    def _fail(self, problems: list[str], parameter: str | None = None) -> None:
        first = problems[0]
        match = re.search(r"parameter '([^']*)'", first)
        raise ArgumentError(
            f"tool {self.tool!r}: " + "; ".join(problems),
            tool=self.tool,
            parameter=parameter or (match.group(1) if match else None),
            problems=problems,
        )


def _error_order(error: ValidationError) -> tuple[str, str]:
    return (_path(error), str(error.validator))


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _expected(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(str(k) for k in kind)
    elif kind:
        text = str(kind)
    elif "enum" in schema:
        text = f"one of {schema['enum']}"
    else:
        text = "a value"
    fmt = schema.get("format")
    return f"{text} ({fmt})" if fmt else text


def _parse_number(text: str) -> int | float | None:
    if _INTEGER_TEXT.fullmatch(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _shown(value: Any) -> str:
    """A short, safe rendering of what was given (1 MB strings are not echoed)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return _trim(text)


def _trim(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else f"{text[:_MAX_SHOWN]}… ({len(text)} chars)"
