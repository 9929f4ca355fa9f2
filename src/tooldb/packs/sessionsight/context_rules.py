"""The ConText algorithm (Harkema et al., J Biomed Inform 2009; NegEx, Chapman et al. 2001)
over medspaCy's published English lexicon, without spaCy.

Why not medspaCy itself: it imports medspacy_quickumls, which pins numpy 1.26, and the
project keeps numpy 2 (``pip install --dry-run medspacy`` downgrades it). So this module
runs the same algorithm on the same rules (``data/context_rules.json``, copied from
medspaCy 1.3.1; its MIT licence is data/context_rules.LICENSE.md) plus a short list of
additions for therapy notes (``EXTRA_RULES``), each a generic clinical trigger, not a
sentence of ours.

The algorithm, as medspaCy implements it:

1. Split the text into sentences (``.``/``!``/``?`` then a space, ``;``, line breaks)
   and tokens (``n't``, ``'s``, ``/`` split off, as spaCy does).
2. Find modifier triggers (token patterns: ``LOWER`` a word or ``{"IN": [...]}``,
   ``OP: "?"``); overlapping matches keep the longest; pseudo-triggers ("no increase",
   "not only", ...) block the triggers inside them.
3. Each trigger's scope runs FORWARD to the end of its sentence, BACKWARD to its start
   (or both), and is cut at any TERMINATE trigger ("but", "however", "apart from"...) and
   at the next trigger of its own category.
4. A target inside a trigger's scope (and not overlapping the trigger) takes its
   category: NEGATED_EXISTENCE, HISTORICAL, HYPOTHETICAL, POSSIBLE_EXISTENCE, FAMILY.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

RULES_FILE = Path(__file__).parent / "data" / "context_rules.json"

#: Statuses, in the order a target with several modifiers takes them (the first wins):
#: someone else's experience says nothing about the client; a negation beats "history".
STATUS_OF_CATEGORY = {
    "FAMILY": "other",
    "NEGATED_EXISTENCE": "negated",
    "HYPOTHETICAL": "hypothetical",
    "HISTORICAL": "historical",
    "POSSIBLE_EXISTENCE": "possible",
}
PRIORITY = list(STATUS_OF_CATEGORY)

#: Additions for mental-health notes (category, literal, direction), chosen before any
#: evaluation as triggers a clinician writes: past-tense markers, experiencers beyond the
#: family list, "in case of", and negations written after the finding ("SI denied").
EXTRA_RULES: list[tuple[str, str, str]] = [
    ("NEGATED_EXISTENCE", "never", "FORWARD"),
    ("NEGATED_EXISTENCE", "denied", "BIDIRECTIONAL"),
    ("NEGATED_EXISTENCE", "absent", "BACKWARD"),
    ("NEGATED_EXISTENCE", "has resolved", "BACKWARD"),
    ("NEGATED_EXISTENCE", "have resolved", "BACKWARD"),
    ("NEGATED_EXISTENCE", "no longer", "BIDIRECTIONAL"),
    ("NEGATED_EXISTENCE", "abstains from", "FORWARD"),
    ("HISTORICAL", "previous", "FORWARD"),
    ("HISTORICAL", "prior", "FORWARD"),
    ("HISTORICAL", "past", "FORWARD"),
    ("HISTORICAL", "former", "FORWARD"),
    ("HISTORICAL", "remote", "FORWARD"),
    ("HISTORICAL", "status post", "FORWARD"),
    ("HISTORICAL", "s/p", "FORWARD"),
    ("HISTORICAL", "in the past", "BACKWARD"),
    ("HYPOTHETICAL", "in case", "FORWARD"),
    ("HYPOTHETICAL", "in the event", "FORWARD"),
    ("POSSIBLE_EXISTENCE", "probable", "FORWARD"),
    ("POSSIBLE_EXISTENCE", "cannot be ruled out", "BACKWARD"),
    ("FAMILY", "friend", "FORWARD"),
    ("FAMILY", "roommate", "FORWARD"),
    ("FAMILY", "boyfriend", "FORWARD"),
    ("FAMILY", "girlfriend", "FORWARD"),
    ("FAMILY", "stepfather", "FORWARD"),
    ("FAMILY", "stepmother", "FORWARD"),
    ("FAMILY", "ex-partner", "FORWARD"),
    ("FAMILY", "ex-husband", "FORWARD"),
    ("FAMILY", "ex-wife", "FORWARD"),
    ("FAMILY", "family history", "FORWARD"),
]

#: NegEx pseudo-triggers (Chapman's list, the part that reads in therapy notes): they
#: contain a trigger word but do not negate.
PSEUDO_TRIGGERS = [
    "no increase",
    "no change",
    "no significant change",
    "no interval change",
    "not only",
    "not necessarily",
    "not certain if",
    "not certain whether",
    "without difficulty",
    "gram negative",
    "no further",
]

_TOKEN = re.compile(r"\w+(?=n't)|n't|'s|can(?=not\b)|\w+(?:-\w+)*|[^\w\s]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|;|\n+")


@dataclass(frozen=True)
class Token:
    lower: str
    start: int
    end: int


@dataclass(frozen=True)
class Rule:
    category: str
    literal: str
    direction: str  # FORWARD, BACKWARD, BIDIRECTIONAL, TERMINATE, PSEUDO
    pattern: tuple[tuple[frozenset[str], bool], ...]  # (allowed words, optional)


@dataclass
class Modifier:
    rule: Rule
    start: int  # token indices, end exclusive
    end: int
    scope_start: int = 0
    scope_end: int = 0


@dataclass
class Finding:
    """A target with its ConText categories (empty: affirmed)."""

    start: int  # character offsets in the text
    end: int
    text: str
    categories: set[str] = field(default_factory=set)
    triggers: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        for category in PRIORITY:
            if category in self.categories:
                return STATUS_OF_CATEGORY[category]
        return "affirmed"


def tokenize(text: str, offset: int = 0) -> list[Token]:
    return [
        Token(m.group().lower(), m.start() + offset, m.end() + offset)
        for m in _TOKEN.finditer(text)
    ]


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and ``;``-clauses) of ``text``."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _literal_pattern(literal: str) -> tuple[tuple[frozenset[str], bool], ...]:
    return tuple((frozenset({token.lower}), False) for token in tokenize(literal))


def _json_pattern(pattern: list[dict[str, object]]) -> tuple[tuple[frozenset[str], bool], ...]:
    out = []
    for spec in pattern:
        lower = spec["LOWER"]
        words = frozenset(lower["IN"]) if isinstance(lower, dict) else frozenset({str(lower)})
        out.append((frozenset(w.lower() for w in words), spec.get("OP") == "?"))
    return tuple(out)


@cache
def rules() -> tuple[Rule, ...]:
    """The published lexicon, the additions and the pseudo-triggers, compiled."""
    loaded = json.loads(RULES_FILE.read_text(encoding="utf-8"))["context_rules"]
    # The additions first: on a tie (same words, same length) theirs is kept.
    compiled = [Rule(c, lit, d, _literal_pattern(lit)) for c, lit, d in EXTRA_RULES]
    compiled += [
        Rule(
            item["category"],
            item["literal"],
            item["direction"],
            _json_pattern(item["pattern"])
            if item["pattern"]
            else _literal_pattern(item["literal"]),
        )
        for item in loaded
    ]
    compiled += [Rule("PSEUDO", lit, "PSEUDO", _literal_pattern(lit)) for lit in PSEUDO_TRIGGERS]
    return tuple(compiled)


def _match_at(pattern: tuple[tuple[frozenset[str], bool], ...], tokens: list[Token], i: int) -> int:
    """The end of the longest match of ``pattern`` at token ``i``, or -1."""
    if not pattern:
        return i
    (words, optional), rest = pattern[0], pattern[1:]
    best = -1
    if i < len(tokens) and tokens[i].lower in words:
        best = _match_at(rest, tokens, i + 1)
    if optional:
        best = max(best, _match_at(rest, tokens, i))
    return best


def find_modifiers(tokens: list[Token]) -> list[Modifier]:
    """Trigger matches in one sentence: longest first, no overlaps, pseudo-triggers kept
    out (they only block)."""
    found: list[Modifier] = []
    for rule in rules():
        for i in range(len(tokens)):
            end = _match_at(rule.pattern, tokens, i)
            if end > i:
                found.append(Modifier(rule, i, end))
    found.sort(key=lambda m: (-(m.end - m.start), m.start))
    kept: list[Modifier] = []
    taken: set[int] = set()
    for modifier in found:
        span = set(range(modifier.start, modifier.end))
        if span & taken:
            continue
        taken |= span
        kept.append(modifier)
    return sorted((m for m in kept if m.rule.direction != "PSEUDO"), key=lambda m: m.start)


def _set_scopes(modifiers: list[Modifier], length: int) -> None:
    for modifier in modifiers:
        direction = modifier.rule.direction
        modifier.scope_start = modifier.start if direction == "FORWARD" else 0
        modifier.scope_end = modifier.end if direction == "BACKWARD" else length
        if direction == "TERMINATE":
            modifier.scope_start = modifier.scope_end = modifier.start
    for modifier in modifiers:
        if modifier.rule.direction == "TERMINATE":
            continue
        for other in modifiers:
            if other is modifier:
                continue
            if (
                other.rule.direction != "TERMINATE"
                and other.rule.category != modifier.rule.category
            ):
                continue
            if (
                modifier.rule.direction in ("FORWARD", "BIDIRECTIONAL")
                and other.start >= modifier.end
            ):
                modifier.scope_end = min(modifier.scope_end, other.start)
            if (
                modifier.rule.direction in ("BACKWARD", "BIDIRECTIONAL")
                and other.end <= modifier.start
            ):
                modifier.scope_start = max(modifier.scope_start, other.end)


def annotate(text: str, targets: list[tuple[int, int]]) -> list[Finding]:
    """ConText categories of each target (character spans of ``text``)."""
    findings = [Finding(s, e, text[s:e]) for s, e in targets]
    for sent_start, sent_end in sentences(text):
        tokens = tokenize(text[sent_start:sent_end], sent_start)
        inside = [f for f in findings if sent_start <= f.start < sent_end]
        if not inside or not tokens:
            continue
        modifiers = find_modifiers(tokens)
        _set_scopes(modifiers, len(tokens))
        for finding in inside:
            first = next(i for i, t in enumerate(tokens) if t.end > finding.start)
            last = max(i for i, t in enumerate(tokens) if t.start < finding.end) + 1
            for modifier in modifiers:
                if modifier.rule.direction == "TERMINATE":
                    continue
                if modifier.start < last and first < modifier.end:
                    continue  # the trigger is part of the target itself
                if modifier.scope_start <= first and last <= modifier.scope_end:
                    finding.categories.add(modifier.rule.category)
                    finding.triggers.append(
                        " ".join(t.lower for t in tokens[modifier.start : modifier.end])
                    )
    return findings
