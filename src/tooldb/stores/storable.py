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
