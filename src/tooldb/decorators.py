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

from .binding import normalize_parameters
from .errors import DefinitionError
from .types import Returns, ToolKind, ToolSpec

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
    summary, param_docs = parse_docstring(inspect.getdoc(func) or "")
    hints = _hints(func)
    try:
        return ToolSpec(
            name=name or func.__name__,
            description=description if description is not None else summary,
            category=category,
            kind=ToolKind.PYTHON,
            target=f"{func.__module__}:{func.__qualname__}",
            parameters=normalize_parameters(_parameters_schema(func, hints, param_docs)),
            returns=Returns(returns) if returns else _returns_from_hint(hints.get("return")),
            timeout_s=timeout_s,
            metadata=dict(metadata or {}),
        )
    except ValueError as exc:
        raise DefinitionError(f"@tool {func.__qualname__}: {exc}") from None


def tools_of_module(module_name: str) -> list[tuple[ToolSpec, Callable[..., Any]]]:
    """Every ``@tool`` function reachable as an attribute of the module."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DefinitionError(f"cannot import module {module_name!r}: {exc}") from None
    found: dict[str, tuple[ToolSpec, Callable[..., Any]]] = {}
    for value in vars(module).values():
        spec = getattr(value, SPEC_ATTRIBUTE, None)
        if isinstance(spec, ToolSpec):
            found.setdefault(spec.name, (spec, value))
    return sorted(found.values(), key=lambda pair: pair[0].name)


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise DefinitionError(f"@tool {func.__qualname__}: cannot resolve type hints: {exc}") from None


def _parameters_schema(
    func: Callable[..., Any], hints: dict[str, Any], docs: dict[str, str]
) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    open_ended = False
    for param in inspect.signature(func).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind is param.VAR_POSITIONAL or param.name in {"self", "cls"}:
            continue
        schema = schema_for_hint(hints.get(param.name, Any))
        if param.name in docs and "description" not in schema:
            schema["description"] = docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _json_safe(param.default):
            schema["default"] = (
                param.default.value if isinstance(param.default, enum.Enum) else param.default
            )
        properties[param.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = open_ended
    return out


_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    dict: {"type": "object"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    Any: {},
}


def schema_for_hint(hint: Any) -> dict[str, Any]:
    """JSON Schema for a type hint; pydantic handles what is not simple."""
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = schema_for_hint(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in {typing.Union, types.UnionType}:
        options = [schema_for_hint(a) for a in args]
        simple = [o.get("type") for o in options if set(o) == {"type"}]
        if len(simple) == len(options):
            return {"type": simple}
        return {"anyOf": options}
    if origin in {list, set, frozenset, Sequence, tuple} or (
        isinstance(origin, type) and issubclass(origin, Sequence)
    ):
        schema = {"type": "array"}
        if args:
            schema["items"] = schema_for_hint(args[0])
        return schema
    if origin in {dict, Mapping}:
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_for_hint(args[1])
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    return _pydantic_schema(hint)


def _pydantic_schema(hint: Any) -> dict[str, Any]:
    from pydantic import TypeAdapter

    try:
        schema: dict[str, Any] = TypeAdapter(hint).json_schema()
    except Exception as exc:
        raise DefinitionError(f"cannot describe type {hint!r} as JSON Schema: {exc}") from None
    return schema


def _returns_from_hint(hint: Any) -> Returns:
    if hint is None or hint is type(None):
        return Returns.NONE
    if hint is str:
        return Returns.TEXT
    if hint in {int, float, bool}:
        return Returns.SCALAR
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is list and args and typing.get_origin(args[0]) in {dict, Mapping}:
        return Returns.TABLE
    return Returns.JSON


def _json_safe(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?):\s*$")
_GOOGLE_PARAM = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]+\s)?(\w+):\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into the description and per-parameter descriptions."""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line.strip())
        rest = _REST_PARAM.match(line.strip())
        if header and not line.startswith(" "):
            section, current = header.group(1), None
        elif rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            section = "rest"
        elif line.strip().startswith(":"):
            section, current = "rest", None
        elif section in {"Args", "Arguments", "Parameters", "Params"}:
            match = _GOOGLE_PARAM.match(line)
            indent = len(line) - len(line.lstrip())
            if match and (current is None or indent <= _indent_of(doc, current)):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "rest":
            if current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section is None:
            description.append(line)
    return "\n".join(description).strip(), params


def _indent_of(doc: str, name: str) -> int:
    for line in doc.splitlines():
        if _GOOGLE_PARAM.match(line) and line.strip().lstrip("*").startswith(name):
            return len(line) - len(line.lstrip())
    return 0
