"""Words, stems and what a parameter's schema says about the value it wants.

Everything here is generic English and JSON Schema: no rule knows a tool, a parameter
or a sentence. Stems are crude on purpose (lower case, a plural ``s`` dropped, the
first five letters), so "calculate"/"calculation" and "melting"/"melt" meet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _word_set(
    "a an the and or but if then else of to in on at by for with from into onto over under "
    "about as is are was were be been being am do does did done have has had having i me my "
    "mine we us our you your he him his she her it its they them their this that these those "
    "there here what which who whom whose when where why how all any each every some such no "
    "not only own same so than too very can could will would shall should may might must "
    "please tell give show find get let make want need like also just using use used via per "
    "up down out off again once more most other another both few many much own s t don now e "
    "g eg ie etc i'd i'm it's what's let's whats value values number given provided specified "
    "specific default optional required parameter type format e.g i.e"
)
"""Words that never carry a value or a topic on their own."""

STOP_STEMS = frozenset(w[:5] for w in STOPWORDS if len(w) > 3) | frozenset(
    w for w in STOPWORDS if len(w) <= 3
)

START_WORDS = _word_set(
    "from start starting begin beginning since origin source initial first min minimum lower "
    "departure depart after earliest low"
)
END_WORDS = _word_set(
    "to end ending until till destination target final last second max maximum upper arrival "
    "arrive before latest high"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9']*|\d+")


def words(text: str) -> list[str]:
    """Lower-case words of ``text``; identifiers split on ``_``, ``.``, ``-`` and camelCase."""
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
    return [w.lower() for w in _WORD.findall(text.replace("_", " "))]


def stem(word: str) -> str:
    word = word.lower()
    if len(word) > 3 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:5]


def content_stems(text: str) -> set[str]:
    """Stems of the words of ``text`` that are not stop words."""
    return {stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1}


@dataclass(frozen=True)
class Param:
    """One parameter as extraction sees it: its type and the words that name it."""

    name: str
    kind: str  # JSON Schema type (the first non-null one), or "enum" / "any"
    schema: dict[str, Any]
    required: bool
    name_words: tuple[str, ...]
    cue_stems: frozenset[str]  # stems of the name's words and the description's nouns
    enum: tuple[Any, ...] | None
    item_kind: str | None = None
    options: tuple[str, ...] = field(default_factory=tuple)  # values quoted in the description

    @property
    def description(self) -> str:
        text = self.schema.get("description")
        return text if isinstance(text, str) else ""

    def says(self, *terms: str) -> bool:
        """Whether the name or description uses any of ``terms`` (stems compared)."""
        return any(stem(term) in self.cue_stems for term in terms)


def kind_of(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(kind, str):
        return kind
    return "enum" if isinstance(schema.get("enum"), list) else "any"


def params_of(schema: dict[str, Any]) -> list[Param]:
    """The parameters of a JSON Schema object, required ones first, each described once."""
    return list(_params_cached(_freeze(schema)))


@lru_cache(maxsize=4096)
def _params_cached(frozen: Any) -> tuple[Param, ...]:
    import json

    schema = json.loads(frozen)
    properties = schema.get("properties") or {}
    required = [n for n in schema.get("required") or [] if n in properties]
    order = required + [n for n in properties if n not in required]
    out: list[Param] = []
    for name in order:
        prop = properties[name] if isinstance(properties[name], dict) else {}
        given = prop.get("description")
        description = given if isinstance(given, str) else ""
        name_words = tuple(w for w in words(name) if w)
        cues = {stem(w) for w in name_words} | content_stems(_leading_clause(description))
        enum = prop.get("enum")
        items = prop.get("items") if isinstance(prop.get("items"), dict) else None
        out.append(
            Param(
                name=name,
                kind=kind_of(prop),
                schema=prop,
                required=name in required,
                name_words=name_words,
                cue_stems=frozenset(cues),
                enum=tuple(enum) if isinstance(enum, list) else None,
                item_kind=kind_of(items) if items is not None else None,
                options=tuple(_quoted_options(description)),
            )
        )
    return tuple(out)


def _freeze(schema: dict[str, Any]) -> str:
    import json

    return json.dumps(schema, sort_keys=True, default=str)


def _leading_clause(description: str) -> str:
    """The description up to its first example or default (those name other values)."""
    cut = re.split(r"\be\.g\.|\bfor example\b|\bsuch as\b|\bdefault", description, maxsplit=1)
    return cut[0]


def _quoted_options(description: str) -> list[str]:
    """Values a description quotes as its choices: "Can be 'melting', 'freezing'"."""
    description = re.split(r"\bdefaults?\b", description, maxsplit=1, flags=re.I)[0]
    found = re.findall(r"'([^'\n]{1,40})'|\"([^\"\n]{1,40})\"", description)
    return [a or b for a, b in found if (a or b).strip()]
