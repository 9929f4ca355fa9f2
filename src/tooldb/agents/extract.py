"""Arguments from a task's plain text, without a model: the router's extraction.

Deliberately simple and predictable, in this order for each parameter:
1. ``name = value`` / ``name: value`` / ``name is|to|of value`` where ``name`` is the
   parameter's name (or its words: ``max_items`` matches "max items");
2. an enum value that appears in the task;
3. by type: numbers in order of appearance for number/integer parameters (all of
   them for an array of numbers), quoted strings in order for strings, ``true`` /
   ``false`` for booleans;
4. the whole task for the main required string parameter still unfilled;
5. nothing otherwise, so binding applies the schema's defaults (or names what is
   missing). Every choice is explained in ``Extraction.notes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_QUOTED = r"\"([^\"]*)\"|'([^']*)'|“([^”]*)”"
_VALUE = rf"(?:{_QUOTED}|({_NUMBER})(?![\w.])|([^\s,;]+))"
_LINKS = r"\s*(=|:|\bis\b|\bto\b|\bof\b|\bas\b|\bequals?\b)?\s*"


@dataclass
class Extraction:
    arguments: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


def extract_arguments(task: str, schema: dict[str, Any]) -> Extraction:
    """Best-effort arguments for ``schema`` (a JSON Schema object) from ``task``."""
    out = Extraction()
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if name in properties]
    order = required + [name for name in properties if name not in required]
    numbers = [(m.start(), m.group(0)) for m in re.finditer(rf"(?<![\w.]){_NUMBER}(?![\w.])", task)]
    quoted = [
        (m.start(), next(g for g in m.groups() if g is not None))
        for m in re.finditer(_QUOTED, task)
    ]
    used: set[int] = set()  # start offsets of values already given to a parameter

    for name in order:
        prop = properties[name] if isinstance(properties[name], dict) else {}
        kind = _type(prop)
        enum = prop.get("enum") if isinstance(prop.get("enum"), list) else None
        named = _named_value(task, name, kind, enum)
        if named is not None:
            value, start = named
            out.arguments[name], out.notes[name] = value, "named in the task"
            used.add(start)
            continue
        if enum is not None:
            found = _enum_value(task, enum, used)
            if found is not None:
                out.arguments[name], out.notes[name] = found[0], "enum value in the task"
                used.add(found[1])
            continue
        if kind in {"integer", "number"}:
            for start, text in numbers:
                if start not in used and (kind == "number" or _is_int(text)):
                    out.arguments[name] = _number(text, kind)
                    out.notes[name] = "number in the task"
                    used.add(start)
                    break
        elif kind == "array" and _type(prop.get("items") or {}) in {"integer", "number"}:
            items_kind = _type(prop["items"])
            values = [_number(t, items_kind) for s, t in numbers if s not in used]
            if values:
                out.arguments[name], out.notes[name] = values, "numbers in the task"
                used.update(s for s, _ in numbers)
        elif kind == "string":
            for start, text in quoted:
                if start not in used:
                    out.arguments[name], out.notes[name] = text, "quoted in the task"
                    used.add(start)
                    break
        elif kind == "boolean":
            match = re.search(r"\b(true|false)\b", task, re.IGNORECASE)
            if match and match.start() not in used:
                out.arguments[name] = match.group(1).lower() == "true"
                out.notes[name] = "true/false in the task"
                used.add(match.start())

    main = next(
        (
            n
            for n in required
            if _type(properties[n]) == "string"
            and "enum" not in properties[n]
            and n not in out.arguments
        ),
        None,
    )
    if main is not None:
        out.arguments[main], out.notes[main] = task, "the task text"
    return out


def _named_value(
    task: str, name: str, kind: str, enum: list[Any] | None = None
) -> tuple[Any, int] | None:
    """A value written right after the parameter's name; a bare word needs a link
    (``=``, ``:``, is, to ...) so that "units for 3 days" does not make units "for"."""
    words = [w for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]
    if not words:
        return None
    label = r"[\s_-]*".join(re.escape(w) for w in words)
    pattern = rf"(?<!\w){label}(?!\w){_LINKS}{_VALUE}"
    for match in re.finditer(pattern, task, re.IGNORECASE):
        link, dq, sq, cq, number, bare = match.groups()
        if bare is not None and link is None:
            continue
        text = next(g for g in (dq, sq, cq, number, bare) if g is not None)
        group = 2 + [dq, sq, cq, number, bare].index(text)
        value = _coerce(text, kind)
        if value is None or (enum is not None and value not in enum):
            continue
        return value, match.start(group)
    return None


def _enum_value(task: str, enum: list[Any], used: set[int]) -> tuple[Any, int] | None:
    """The first enum value written in the task (not already given to a parameter); for
    short codes (``C``, ``km``) also a capitalised word they abbreviate (Celsius)."""
    hits: list[tuple[int, Any]] = []
    for option in enum:
        if not isinstance(option, str) or not option:
            continue
        for match in re.finditer(rf"(?<!\w){re.escape(option)}(?!\w)", task, re.IGNORECASE):
            hits.append((match.start(), option))
    free = sorted(hit for hit in hits if hit[0] not in used)
    if free:
        return free[0][1], free[0][0]
    if hits or not all(isinstance(o, str) and len(o) <= 3 for o in enum):
        return None
    for match in re.finditer(r"(?<!\w)([A-Z][a-z]{3,})", task):
        if match.start() == 0 or match.start() in used:
            continue
        word = match.group(1).lower()
        for option in enum:
            if word.startswith(option.lower()):
                return option, match.start()
    return None


def _coerce(text: str | None, kind: str) -> Any:
    if text is None:
        return None
    if kind in {"integer", "number"}:
        if re.fullmatch(_NUMBER, text) and (kind == "number" or _is_int(text)):
            return _number(text, kind)
        return None
    if kind == "boolean":
        lowered = text.lower()
        return {"true": True, "yes": True, "false": False, "no": False}.get(lowered)
    if kind == "string":
        return text
    return None


def _type(prop: dict[str, Any]) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else "string" if "enum" not in prop else "enum"


def _is_int(text: str) -> bool:
    return re.fullmatch(r"-?\d+", text) is not None


def _number(text: str, kind: str) -> int | float:
    value = float(text)
    return int(value) if kind == "integer" or (value.is_integer() and _is_int(text)) else value
