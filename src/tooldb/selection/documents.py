"""What text stands for a tool in retrieval, and how text becomes search terms.

The document is ``name (name words). description. category. parameters: p: desc; ...``:
the name split into words (``get_weather`` -> "get weather"), because tasks are
written in words; the description, which carries most of the meaning; and the
parameters, whose names often are the nouns a task mentions. The order and parts
were chosen with bench/select.py (see docs/selection.md for the numbers).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import snowballstemmer

from ..types import ToolSpec

MAX_DOCUMENT_CHARS = 4000
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")
_SEPARATORS = re.compile(r"[_\-.:/\s]+")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

#: The common English stop-word list (NLTK's), plus request filler ("please", "want").
_STOP_TEXT = """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma
    mightn mustn needn shan shouldn wasn weren won wouldn could would please want need"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


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


_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=32_768)
def stem(word: str) -> str:
    """Snowball (Porter 2) English stem: "similarity" and "similar" meet, as do "images"
    and "image". Cached: the words that recur are few and Snowball costs ~25 µs. Not
    every word: 100,000 tools bring ~200,000 distinct ones (ids, numbers), most seen
    once, and keeping them all held 30 MB."""
    return word if len(word) <= 3 else str(_STEMMER.stemWord(word))


def terms(text: str) -> list[str]:
    """Search terms: camelCase split, lower-cased, stop words dropped, stemmed."""
    words = _TOKEN.findall(_CAMEL.sub(" ", text[:100_000]))
    return [stem(w) for w in (w.lower() for w in words) if w not in STOP_WORDS]
