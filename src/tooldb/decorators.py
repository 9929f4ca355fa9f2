"""The ``@tool`` decorator: a Python function becomes a ToolSpec without restating it.

Name from the function, description and parameter descriptions from the
docstring (Google ``Args:`` or reST ``:param x:``), parameters as JSON Schema
from type hints and defaults, ``returns`` from the return annotation. The
function itself is returned unchanged, so it stays callable and testable.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from jsonschema import Draft202012Validator

from .binding import normalize_parameters
from .binding.runtime import CONTEXT_FIELD, Runtime
from .context import CONTEXT_KEY
from .errors import DefinitionError
from .types import LoopContext, Returns, ToolKind, ToolSpec

F = TypeVar("F", bound=Callable[..., Any])
SPEC_ATTRIBUTE = "__tooldb_spec__"


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    category: str = "general",
    returns: Returns | str | None = None,
    timeout_s: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...
def tool(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    category: str = "general",
    returns: Returns | str | None = None,
    timeout_s: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> F | Callable[[F], F]:
    """Mark a sync or async function as a tool (``@tool`` or ``@tool(category=...)``)."""

    def mark(func: F) -> F:
        spec = spec_from_function(
            func,
            name=name,
            description=description,
            category=category,
            returns=returns,
            timeout_s=timeout_s,
            metadata=metadata,
        )
        setattr(func, SPEC_ATTRIBUTE, spec)
        return func

    return mark(fn) if fn is not None else mark


def spec_from_function(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    category: str = "general",
    returns: Returns | str | None = None,
    timeout_s: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ToolSpec:
    """Derive a ToolSpec from a function's signature, hints and docstring."""
    label = _qualname(func)
    if not inspect.isroutine(func):  # an instance has no import path a target could name
        raise DefinitionError(
            f"@tool needs a function or method, got a {type(func).__name__} object "
            "(wrap the call in a function)"
        )
    summary, param_docs = parse_docstring(inspect.getdoc(func) or "")
    hints = _hints(func)
    context = context_parameter(hints)
    if context is not None:
        metadata = {**(metadata or {}), CONTEXT_KEY: context}
    try:
        return ToolSpec(
            name=name or func.__name__,
            description=description if description is not None else summary,
            category=category,
            kind=ToolKind.PYTHON,
            target=f"{func.__module__}:{label}",
            parameters=normalize_parameters(_parameters_schema(func, hints, param_docs)),
            returns=Returns(returns) if returns else _returns_from_hint(hints.get("return")),
            timeout_s=timeout_s,
            metadata=dict(metadata or {}),
        )
    except (ValueError, DefinitionError) as exc:
        raise DefinitionError(f"@tool {label}: {exc}") from None


def tools_of_module(module_name: str) -> list[tuple[ToolSpec, Callable[..., Any]]]:
    """Every ``@tool`` function reachable as an attribute of the module."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a module failing on import is a definition problem
        raise DefinitionError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    found: dict[str, tuple[ToolSpec, Callable[..., Any]]] = {}
    for value in vars(module).values():
        spec = getattr(value, SPEC_ATTRIBUTE, None)
        if not isinstance(spec, ToolSpec):
            continue
        first = found.setdefault(spec.name, (spec, value))
        if first[0] != spec:  # two functions claim one name: which one runs would be luck
            raise DefinitionError(
                f"module {module_name!r}: tool name {spec.name!r} is used by both "
                f"{first[0].target} and {spec.target}"
            )
    return sorted(found.values(), key=lambda pair: pair[0].name)


def _qualname(func: Callable[..., Any]) -> str:
    return getattr(func, "__qualname__", None) or type(func).__qualname__


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise DefinitionError(
            f"@tool {_qualname(func)}: cannot resolve type hints: {exc}"
        ) from None


def _is_context_hint(hint: Any) -> bool:
    if hint is LoopContext:
        return True
    args = typing.get_args(hint)
    return (
        bool(args)
        and LoopContext in args
        and all(a is LoopContext or a is type(None) for a in args)
    )


def _runtime_marker(hint: Any) -> Runtime | None:
    """The ``Runtime(...)`` of an ``Annotated[T, Runtime(...)]`` hint, if any."""
    if typing.get_origin(hint) is not typing.Annotated:
        return None
    return next((m for m in hint.__metadata__ if isinstance(m, Runtime)), None)


def context_parameter(hints: dict[str, Any]) -> str | None:
    """The parameter annotated ``LoopContext`` (or ``LoopContext | None``), if any."""
    names = [name for name, hint in hints.items() if name != "return" and _is_context_hint(hint)]
    if len(names) > 1:
        raise DefinitionError(f"only one parameter may take the LoopContext, got {names}")
    return names[0] if names else None


def _parameters_schema(
    func: Callable[..., Any], hints: dict[str, Any], docs: dict[str, str]
) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    open_ended = False
    for param in inspect.signature(func).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind is param.VAR_POSITIONAL or param.name in {"self", "cls"}:
            continue
        if _is_context_hint(hints.get(param.name)):  # injected by the agent loop, not an argument
            continue
        if param.kind is param.POSITIONAL_ONLY:  # tools are called with keyword arguments
            raise DefinitionError(f"parameter {param.name!r} is positional-only")
        try:
            schema = schema_for_hint(hints.get(param.name, Any))
        except DefinitionError as exc:
            raise DefinitionError(f"parameter {param.name!r}: {exc}") from None
        _hoist_defs(schema, defs)
        runtime = _runtime_marker(hints.get(param.name))
        if runtime is not None:  # filled by the runtime, hidden from the model
            schema[CONTEXT_FIELD] = runtime.field
        if param.name in docs and "description" not in schema:
            schema["description"] = docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        else:
            _add_default(schema, param.default, defs)
        properties[param.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = open_ended
    if defs:
        out["$defs"] = defs
    return out


def _add_default(schema: dict[str, Any], default: Any, defs: dict[str, Any]) -> None:
    """Record a default only when it is JSON and valid for the parameter's own schema."""
    value = default.value if isinstance(default, enum.Enum) else default
    try:
        value = json.loads(json.dumps(value, allow_nan=False))  # tuples become lists
    except (TypeError, ValueError, RecursionError):
        return
    checker = Draft202012Validator.FORMAT_CHECKER
    if Draft202012Validator({**schema, "$defs": defs}, format_checker=checker).is_valid(value):
        schema["default"] = value


def _hoist_defs(schema: Any, found: dict[str, Any]) -> None:
    """Move nested pydantic ``$defs`` to one root map, where ``#/$defs/...`` points."""
    if isinstance(schema, list):
        for item in schema:
            _hoist_defs(item, found)
    elif isinstance(schema, dict):
        for name, sub in (schema.pop("$defs", None) or {}).items():
            if found.setdefault(name, sub) != sub:
                raise DefinitionError(f"two different types are both named {name!r}")
            _hoist_defs(sub, found)
        for key, value in schema.items():
            if key in {"properties", "patternProperties", "dependentSchemas"}:
                for sub in value.values():  # keys are names here, not keywords
                    _hoist_defs(sub, found)
            elif key not in {"default", "enum", "const", "examples"}:
                _hoist_defs(value, found)


_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    dict: {"type": "object"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    set: {"type": "array", "uniqueItems": True},
    frozenset: {"type": "array", "uniqueItems": True},
    Any: {},
}


def schema_for_hint(hint: Any) -> dict[str, Any]:
    """JSON Schema for a type hint; pydantic handles what is not simple."""
    simple = _simple(hint)
    if simple is not None:
        return simple
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _annotated_schema(hint, args)
    if origin is typing.Literal:
        return _enum_schema(list(args))
    if origin in {typing.Union, types.UnionType}:
        return _union_schema(args)
    if origin is tuple:
        return _tuple_schema(args)
    if origin in {list, set, frozenset, Sequence} or (
        isinstance(origin, type) and issubclass(origin, Sequence)
    ):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = schema_for_hint(args[0])
        if origin in {set, frozenset}:
            schema["uniqueItems"] = True
        return schema
    if origin in {dict, Mapping}:
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_for_hint(args[1])
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([member.value for member in hint])
    return _pydantic_schema(hint)


def _simple(hint: Any) -> dict[str, Any] | None:
    try:
        found = _SIMPLE.get(hint)
    except TypeError:  # unhashable, e.g. Annotated[int, {"a": 1}]
        return None
    return dict(found) if found is not None else None


def _annotated_schema(hint: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """Strings in ``Annotated`` are descriptions; anything else (``Field(ge=1)``) is pydantic's."""
    notes = [a for a in args[1:] if isinstance(a, str)]
    only_notes = len(notes) == len(args) - 1
    schema = schema_for_hint(args[0]) if only_notes else _pydantic_schema(hint)
    if notes and "description" not in schema:
        schema["description"] = " ".join(notes)
    return schema


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": values}
    kinds = {_json_type(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    return schema


def _union_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    options = [schema_for_hint(a) for a in args]
    simple = [o["type"] for o in options if set(o) == {"type"} and isinstance(o["type"], str)]
    if len(simple) == len(options):
        return {"type": list(dict.fromkeys(simple))}
    return {"anyOf": options}


def _tuple_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    if not args or args == ((),):
        return {"type": "array", "maxItems": 0} if args else {"type": "array"}
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": schema_for_hint(args[0])}
    return {
        "type": "array",
        "prefixItems": [schema_for_hint(a) for a in args],
        "minItems": len(args),
        "maxItems": len(args),
    }


def _json_type(value: Any) -> str | None:
    for kind, python in (("boolean", bool), ("integer", int), ("number", float), ("string", str)):
        if isinstance(value, python):
            return kind
    return "null" if value is None else None


def _pydantic_schema(hint: Any) -> dict[str, Any]:
    from pydantic import TypeAdapter

    try:
        schema: dict[str, Any] = TypeAdapter(hint).json_schema()
    except Exception as exc:
        raise DefinitionError(f"cannot describe type {hint!r} as JSON Schema: {exc}") from None
    return schema


def _returns_from_hint(hint: Any) -> Returns:
    if hint is None:  # no annotation: nothing is known about the result
        return Returns.JSON
    if typing.get_origin(hint) is typing.Annotated:
        return _returns_from_hint(typing.get_args(hint)[0])
    if hint is type(None):
        return Returns.NONE
    if hint is str:
        return Returns.TEXT
    if hint in {int, float, bool}:
        return Returns.SCALAR
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if (
        origin is list
        and args
        and (args[0] in {dict, Mapping} or typing.get_origin(args[0]) in {dict, Mapping})
    ):
        return Returns.TABLE
    return Returns.JSON


_PARAM_SECTIONS = {
    "Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments",
    "Other Parameters",
}  # fmt: skip
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Raises|Yields?|Examples?|Notes?|Warnings?|See Also|Todo|Attributes|References):\s*$"
)
_GOOGLE_PARAM = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\(.*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]+\s)?(\w+):\s*(.*)$")
_UNDERLINE = re.compile(r"-{3,}")
_NUMPY_TITLES = {
    "Parameters", "Other Parameters", "Returns", "Yields", "Receives", "Raises", "Warns",
    "Warnings", "See Also", "Notes", "References", "Examples", "Attributes", "Methods",
}  # fmt: skip
_NUMPY_PARAM = re.compile(r"(\*{0,2}\w+)\s*(?::.*)?")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into the description and per-parameter descriptions."""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    param_indent = 0
    for line in _numpy_as_google(doc.splitlines()):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped)
        rest = _REST_PARAM.match(stripped)
        if header and indent == 0:
            section, current = header.group(1), None
        elif rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            section = "rest"
        elif stripped.startswith(":"):
            section, current = "rest", None
        elif section in _PARAM_SECTIONS:
            match = _GOOGLE_PARAM.match(line)
            if stripped and indent == 0:  # a dedent ends a Google section
                section, current = "other", None
            elif match and (current is None or indent <= param_indent):
                current, param_indent = match.group(1).lstrip("*"), indent
                params[current] = match.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "rest":
            if current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section is None:
            description.append(line)
    return "\n".join(description).strip(), params


def _numpy_as_google(lines: list[str]) -> list[str]:
    """NumPy sections (a title underlined with dashes) rewritten in Google style, so one
    parser reads both and the sections never leak into the description."""
    out: list[str] = []
    params = False
    skip = False
    for i, line in enumerate(lines):
        underlined = i + 1 < len(lines) and _UNDERLINE.fullmatch(lines[i + 1].strip())
        if skip:
            skip = False
        elif underlined and line.strip() in _NUMPY_TITLES and not line[0].isspace():
            title = line.strip()
            params, skip = title in _PARAM_SECTIONS, True
            out.append(f"{title}:" if _SECTION.match(f"{title}:") else "Notes:")
        elif params and line.strip() and not line[0].isspace():
            entry = _NUMPY_PARAM.fullmatch(line.strip())  # "x : int" -> "    x:"
            out.append(f"    {entry.group(1)}:" if entry else f"    {line}")
        else:
            out.append(f"    {line}" if params and line.strip() else line)
    return out
