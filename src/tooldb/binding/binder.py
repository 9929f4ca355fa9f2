"""The binder: turn raw arguments into validated, completed keyword arguments.

Parameters are stored as JSON Schema (Draft 2020-12), normalised at registration
(``schema.py``). At call time the binder:

1. parses the arguments (a JSON text or a mapping) into an object;
2. rejects unknown names (unless the schema sets ``additionalProperties``);
3. coerces strings that hold a value *losslessly* — ``"42"`` for an integer,
   ``"2.5"`` for a number, ``"true"``/``"false"`` for a boolean — and nothing else;
4. fills defaults of missing parameters;
5. validates (formats such as ``uuid`` included), reporting every problem with
   the parameter, the expected type and what was given, so a model can fix its
   call from the message alone.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping
from itertools import islice
from typing import Any, NamedTuple, NoReturn

from jsonschema.exceptions import ValidationError

from ..errors import ArgumentError
from .flat import compile_flat
from .runtime import fill_runtime, runtime_parameters
from .schema import _described, _shown, _trim, _validator

_INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,4000}")
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_PROBLEMS = 10
_MAX_ERRORS = 200


class _Problem(NamedTuple):
    """One thing wrong with a call, with the parts ArgumentError exposes."""

    text: str
    parameter: str | None = None
    expected: str | None = None
    given: str | None = None


class Binder:
    """Validates arguments against one schema; built once per tool version."""

    def __init__(self, tool: str, schema: dict[str, Any]) -> None:
        self.tool = tool
        self.schema = schema
        self.properties: dict[str, Any] = schema.get("properties", {})
        self.closed = schema.get("additionalProperties", True) is False
        #: names matching one are not unknown, even in a closed schema (JSON Schema's rule)
        self._patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
        self._validator = _validator(schema)
        self._certainly_valid = compile_flat(schema)
        #: (parameter, field) the runtime fills (binding/runtime.py)
        self.runtime = runtime_parameters(schema)
        self._required = set(schema.get("required", ()))
        #: (name, default, whether each use needs a copy): defaults filled in per call
        self._defaults = [
            (name, prop["default"], type(prop["default"]) not in _IMMUTABLE)
            for name, prop in self.properties.items()
            if isinstance(prop, dict) and "default" in prop
        ]

    def bind(
        self, raw: Any, tenant: str | None = None, run_id: str | None = None
    ) -> dict[str, Any]:
        """Return completed keyword arguments, or raise ArgumentError naming every problem.
        Parameters the runtime fills get their values here (``tenant`` and ``run_id``:
        the caller's, when no agent run's LoopContext is current)."""
        arguments = self._parse(raw)
        if self.runtime:
            unfilled = fill_runtime(arguments, self.runtime, self._required, tenant, run_id)
            if unfilled is not None:
                self._fail([_Problem(unfilled)])
        problems = self._unknown(arguments)
        arguments = {name: self._coerce(name, value) for name, value in arguments.items()}
        for name, default, mutable in self._defaults:
            if name not in arguments:
                arguments[name] = copy.deepcopy(default) if mutable else default
        unstorable = _unstorable(arguments)
        if any(problem.expected != "finite number" for problem in unstorable):
            # before validating a value 10,000 levels deep, or an integer too long to show
            self._fail(problems + unstorable)
        known = (
            {k: v for k, v in arguments.items() if k in self.properties} if problems else arguments
        )
        fast = self._certainly_valid
        invalid = [] if not problems and fast and fast(known) else self._invalid(known)
        problems += invalid or unstorable  # NaN for a number: as the type check says it
        if problems:
            self._fail(problems)
        return arguments

    def _parse(self, raw: Any) -> dict[str, Any]:
        if type(raw) is dict and all(type(key) is str for key in raw):  # the usual case
            return dict(raw)
        if raw is None:
            return {}
        if isinstance(raw, str | bytes):
            raw = self._parse_text(raw)
        if not isinstance(raw, Mapping):
            self._fail(
                [
                    _Problem(
                        f"arguments must be a JSON object, got {_described(raw, _shown(raw))}",
                        expected="object",
                        given=_shown(raw),
                    )
                ]
            )
        bad_keys = [key for key in raw if not isinstance(key, str)]
        if bad_keys:
            self._fail([_Problem(f"argument names must be strings, got {_shown(bad_keys[0])}")])
        return dict(raw)

    def _parse_text(self, raw: str | bytes) -> Any:
        if not raw.strip():
            return {}
        try:
            return json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            self._fail(
                [
                    _Problem(
                        f"arguments are not valid JSON ({_trim(reason)}): got {_shown(raw)}; "
                        'send a JSON object like {"name": value}',
                        expected="JSON object",
                        given=_shown(raw),
                    )
                ]
            )

    def _unknown(self, arguments: dict[str, Any]) -> list[_Problem]:
        if not self.closed:
            return []
        unknown = [
            name
            for name in arguments
            if name not in self.properties and not any(p.search(name) for p in self._patterns)
        ]
        if not unknown:
            return []
        accepted = _trim(", ".join(repr(n) for n in self.properties) or "none", 400)
        return [
            _Problem(f"unknown parameter {_trim(repr(name))} (accepted: {accepted})", name)
            for name in unknown
        ]

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

    def _invalid(self, arguments: dict[str, Any]) -> list[_Problem]:
        try:  # a 100k-item array of wrong values must not cost 100k described errors
            found = list(islice(self._validator.iter_errors(arguments), _MAX_ERRORS + 1))
        except RecursionError:  # jsonschema recurses (and reprs the value) per level
            deep = [name for name, value in arguments.items() if _too_deep(value)]
            texts = [(f"parameter {_trim(repr(n))} is nested too deeply", n) for n in deep]
            return [_Problem(*t) for t in texts] or [_Problem("arguments are nested too deeply")]
        problems: dict[_Problem, None] = {}  # ordered and deduplicated
        for error in sorted(found[:_MAX_ERRORS], key=_error_order):
            problems.update(dict.fromkeys(self._describe(error)))
        if len(found) > _MAX_ERRORS:
            problems[_Problem(f"(validation stopped after {_MAX_ERRORS} errors)")] = None
        return list(problems)

    def _describe(self, error: ValidationError) -> list[_Problem]:
        path = _path(error)
        schema = error.schema if isinstance(error.schema, dict) else {}
        if error.validator == "required":
            return _missing(path, schema, error.instance)
        if error.validator == "additionalProperties":
            return _extras(path, schema, error.instance)
        where = f"parameter {path!r}" if path else "arguments"
        expected, given = _expected(schema), _shown(error.instance)
        if error.validator == "type":
            text = f"{where} expected {expected}, got {_described(error.instance, given)}"
        elif error.validator == "enum":
            text = f"{where} expected one of {_trim(_shown(schema.get('enum')), 200)}, got {given}"
        else:
            message = error.message
            if message.startswith(repr(error.instance)):  # jsonschema echoes the whole value
                message = given + message[len(repr(error.instance)) :]
            text = f"{where}: {_trim(message, 200)} (expected {expected})"
        return [_Problem(text, path or None, expected, given)]

    def _fail(self, problems: list[_Problem]) -> NoReturn:
        shown = [p.text for p in problems[:_MAX_PROBLEMS]]
        if len(problems) > _MAX_PROBLEMS:
            shown.append(f"... and {len(problems) - _MAX_PROBLEMS} more problems")
        first = problems[0]
        raise ArgumentError(
            f"tool {self.tool!r}: " + "; ".join(shown),
            tool=self.tool,
            parameter=first.parameter,
            expected=first.expected,
            given=first.given,
            problems=[p.text for p in problems],
        )


#: Arguments nest at most this deep (the arguments object is level 1): deeper values
#: cannot be serialised into the call log (pydantic stops at 255 levels) nor validated.
MAX_DEPTH = 100
#: Integers have at most this many digits: Python reads no longer ones back from JSON.
MAX_INT_DIGITS = 4000
_INT_LIMIT = 10**MAX_INT_DIGITS


def _unstorable(arguments: dict[str, Any]) -> list[_Problem]:
    """What the call log could not store or read back, found before the tool runs:
    NaN and infinities (not JSON), integers past ``MAX_INT_DIGITS``, nesting past
    ``MAX_DEPTH`` or a value that contains itself, names holding a lone surrogate
    (not UTF-8; such a *value* is stored escaped)."""
    if all(key.isascii() and _plainly_storable(value) for key, value in arguments.items()):
        return []  # most calls: plain values only, nothing to walk
    problem = _first_unstorable(arguments)
    return [problem] if problem is not None else []


def _plainly_storable(value: Any) -> bool:
    """A scalar the log stores as it is (containers and the rare bad scalar: walk them)."""
    kind = type(value)
    if kind is int:
        return value.bit_length() <= _INT_BITS
    if kind is float:
        return math.isfinite(value)
    return kind is str or kind is bool or value is None


def _first_unstorable(arguments: dict[str, Any]) -> _Problem | None:
    # iterative, depth-first, with exits: values may be nested past the recursion limit,
    # and a Python caller may pass a list that contains itself
    stack: list[tuple[str, Any, int, bool]] = [("", arguments, 1, False)]
    on_path: set[int] = set()
    done: set[int] = set()
    non_finite: _Problem | None = None
    while stack:
        prefix, container, depth, leaving = stack.pop()
        if leaving:
            on_path.discard(id(container))
            done.add(id(container))
            continue
        if id(container) in on_path:
            return _Problem(f"parameter {_trim(repr(prefix))} contains itself", _top(prefix))
        if id(container) in done:  # the same object under two names: checked once
            continue
        if depth > MAX_DEPTH:  # named by its parameter: the path is 100 levels long
            top = _top(prefix)
            text = f"parameter {_trim(repr(top))} is nested too deeply (over {MAX_DEPTH} levels)"
            return _Problem(text, top)
        on_path.add(id(container))
        stack.append((prefix, container, depth, True))
        mapping = isinstance(container, Mapping)
        items = container.items() if mapping else enumerate(container)
        for key, value in items:
            if mapping and isinstance(key, str) and not _utf8(key):
                shown = _trim(ascii(key))
                text = f"{'parameter ' + repr(prefix) if prefix else 'an argument'} has a name "
                text += f"that is not valid Unicode (a lone surrogate): {shown}"
                return _Problem(text, prefix or None, "valid Unicode text", shown)
            path = _join(prefix, key)
            problem = _bad_scalar(path, value)
            if problem is not None and problem.expected != "finite number":
                return problem
            non_finite = non_finite or problem
            if isinstance(value, Mapping | list | tuple):
                stack.append((path, value, depth + 1, False))
    return non_finite  # only once nothing worse was found: validation may then run


def _top(path: str) -> str:
    """The parameter a nested value's path starts with: ``a`` of ``a.b[0]``."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def _bad_scalar(path: str, value: Any) -> _Problem | None:
    name = _trim(repr(path))
    if isinstance(value, float) and not math.isfinite(value):
        shown = _shown(value)
        return _Problem(
            f"parameter {name} expected a finite number, got {shown}", path, "finite number", shown
        )
    if isinstance(value, int) and value.bit_length() > _INT_BITS and abs(value) >= _INT_LIMIT:
        shown = f"an integer of {int(value.bit_length() * 0.30103)}+ digits"
        text = (
            f"parameter {name} expected an integer of at most {MAX_INT_DIGITS} digits, got {shown}"
        )
        return _Problem(text, path, f"integer of at most {MAX_INT_DIGITS} digits", shown)
    return None


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: Integers of fewer bits are certainly shorter than MAX_INT_DIGITS digits.
_INT_BITS = int(MAX_INT_DIGITS * 3.3219) - 1


#: Default values that a call may share rather than get a deep copy of.
_IMMUTABLE = frozenset({str, int, bool, type(None), float})


def _missing(path: str, schema: dict[str, Any], instance: Any) -> list[_Problem]:
    """jsonschema reports one error per missing name, with the name only in its prose."""
    if not isinstance(instance, Mapping):
        return []
    problems = []
    for name in schema.get("required", []):
        if name not in instance:
            full = f"{path}.{name}" if path else name
            expected = _expected(_sub_schema(schema, name))
            problems.append(
                _Problem(
                    f"missing required parameter {_trim(repr(full))} ({expected})", full, expected
                )
            )
    return problems


def _extras(path: str, schema: dict[str, Any], instance: Any) -> list[_Problem]:
    if not isinstance(instance, Mapping):
        return []
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
    where = f"parameter {path!r}" if path else "arguments"
    accepted = _trim(", ".join(map(repr, known)) or "none", 400)
    return [
        _Problem(f"{where}: unknown field {_trim(repr(k))} (accepted: {accepted})", path)
        for k in extras
    ]


def _sub_schema(schema: Any, name: str) -> dict[str, Any]:
    if isinstance(schema, dict):
        sub = schema.get("properties", {}).get(name)
        if isinstance(sub, dict):
            return sub
    return {}


def _error_order(error: ValidationError) -> tuple[list[tuple[bool, str, int]], str]:
    """Parameters by name, array items by index (``xs[2]`` before ``xs[10]``)."""
    parts = [
        (True, part, 0) if isinstance(part, str) else (False, "", int(part))
        for part in error.absolute_path
    ]
    return (parts, str(error.validator))


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out = _join(out, part)
    return out


def _join(path: str, part: str | int) -> str:
    """``a`` + ``b`` = ``a.b``; ``a`` + ``0`` = ``a[0]``: how parameters are named in errors."""
    return f"{path}[{part}]" if isinstance(part, int) else (f"{path}.{part}" if path else part)


def _expected(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(kind, list):
        text = " or ".join(str(k) for k in kind)
    elif kind:
        text = str(kind)
    elif "enum" in schema:
        text = f"one of {_trim(_shown(schema['enum']), 200)}"
    elif "const" in schema:
        text = _shown(schema["const"])
    elif isinstance(options, list) and options:
        text = " or ".join(_expected(o if isinstance(o, dict) else {}) for o in options)
    else:
        text = "a value"
    fmt = schema.get("format")
    return f"{text} ({fmt})" if fmt else text


def _parse_number(text: str) -> int | float | None:
    if _INTEGER_TEXT.fullmatch(text):
        return int(text)
    if not _NUMBER_TEXT.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def _too_deep(value: Any) -> bool:
    try:
        repr(value)
    except RecursionError:
        return True
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")
