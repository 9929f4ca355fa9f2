"""What text stands for a tool in retrieval, and how text becomes search terms.

The document is ``name (name words). description. category. parameters: p: desc; ...``:
the name split into words (``get_weather`` -> "get weather"), because tasks are
written in words; the description, which carries most of the meaning; and the
parameters, whose names often are the nouns a task mentions. The order and parts
were chosen with bench/selection.py (see docs/selection.md for the numbers).
"""

from __future__ import annotations

import re
from typing import Any

from .types import ToolSpec

MAX_DOCUMENT_CHARS = 4000
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")
_SEPARATORS = re.compile(r"[_\-.:/\s]+")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "him",
        "her",
        "its",
        "them",
        "what",
        "which",
        "who",
        "whom",
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "please",
        "want",
        "need",
        "using",
        "use",
    ]
)


def split_name(name: str) -> str:
    """``getWeatherForecast`` -> ``get Weather Forecast``, ``a_b.v2`` -> ``a b v2``."""
    return " ".join(_CAMEL.sub(" ", part) for part in _SEPARATORS.split(name) if part).strip()


def tool_document(spec: ToolSpec) -> str:
    """The text a tool is embedded and lexically indexed by."""
    parts = [f"{spec.name} ({split_name(spec.name)})."]
    if spec.description.strip():
        parts.append(spec.description.strip())
    if spec.category and spec.category != "general":
        parts.append(f"Category: {split_name(spec.category)}.")
    params = _parameter_text(spec.parameters)
    if params:
        parts.append(f"Parameters: {params}")
    return " ".join(parts)[:MAX_DOCUMENT_CHARS]


def _parameter_text(schema: dict[str, Any]) -> str:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return ""
    items = []
    # By name: PostgreSQL's JSONB does not keep key order, and a document must not change
    # when a tool makes a round trip through the store.
    for name, prop in sorted(properties.items()):
        description = prop.get("description", "") if isinstance(prop, dict) else ""
        words = split_name(str(name))
        items.append(f"{words}: {description}".strip().rstrip(":") if description else words)
    return "; ".join(items)


def stem(word: str) -> str:
    """A conservative English suffix stripper: plurals and common verb endings only."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us")):
                return word
            return word[: len(word) - len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """Search terms: camelCase split, lower-cased, stop words dropped, lightly stemmed."""
    words = _TOKEN.findall(_CAMEL.sub(" ", text[:100_000]))
    return [stem(w) for w in (w.lower() for w in words) if w not in STOP_WORDS]
