"""Text and JSON values every store accepts: no NUL (PostgreSQL rejects it in text and
JSON) and no lone surrogate (not UTF-8). Such characters are kept as their escapes."""

from __future__ import annotations

from typing import Any


def storable_text(text: str | None) -> str | None:
    """Text every store accepts: no NUL (PostgreSQL) and no lone surrogates (UTF-8)."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def storable_value(value: Any) -> Any:
    """A JSON-able value with every string (keys too) made ``storable_text``."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_value(k): storable_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable_value(item) for item in value]
    return value


#: A stored value nests at most this deep; deeper parts are replaced by a marker.
MAX_STORED_DEPTH = 100
#: Integers past this many digits are stored as a marker (JSON readers refuse them).
_MAX_INT_BITS = 13_000


def storable_arguments(value: Any) -> Any:
    """Any Python value as JSON that every store accepts and reads back: a call's
    arguments for the log, whatever the caller sent (a rejected call's arguments are
    recorded as given). Non-finite numbers become their names (``"NaN"``), integers
    of thousands of digits, nesting past ``MAX_STORED_DEPTH`` and a value that
    contains itself become a marker text, names become ``storable_text``, other
    objects their JSON form or ``repr``. Strings are kept (the store's encoder
    escapes what UTF-8 cannot carry)."""
    return _storable(value, 0, set())


def _storable(value: Any, depth: int, path: set[int]) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            return f"<integer of about {int(value.bit_length() * 0.30103)} digits>"
        return int(value)
    if isinstance(value, float):
        return float(value) if value == value and value not in _INFINITIES else repr(value)
    if isinstance(value, str):
        return str(value)
    if not isinstance(value, dict | list | tuple):
        try:  # dataclasses, models, sets...: their JSON form, checked the same way
            from pydantic_core import to_jsonable_python

            converted = to_jsonable_python(value, fallback=repr)
        except Exception:  # a value that cannot even be converted
            return _repr(value)
        if isinstance(converted, dict | list) and depth < MAX_STORED_DEPTH:
            return _storable(converted, depth, path)
        return converted if not isinstance(converted, dict | list) else "<nested too deeply>"
    if depth >= MAX_STORED_DEPTH:
        return "<nested too deeply>"
    if id(value) in path:
        return "<contains itself>"
    path.add(id(value))
    try:
        if isinstance(value, dict):
            return {
                storable_text(k if isinstance(k, str) else _repr(k)): _storable(v, depth + 1, path)
                for k, v in value.items()
            }
        return [_storable(item, depth + 1, path) for item in value]
    finally:
        path.discard(id(value))


_INFINITIES = (float("inf"), float("-inf"))


def _repr(value: Any) -> str:
    try:
        return storable_text(repr(value)) or ""
    except Exception:  # a repr that raises
        return f"<{type(value).__name__}>"
