"""Typed values found in a sentence, each a ``Span`` with where it is and what it is.

Numbers (digits, number words, percentages, money), quantities (a number and the unit
word after it), dates and times (``dateparser`` reads the spans the patterns find, so
it costs only when a date is there), emails, URLs, paths, booleans, quoted text,
capitalised names, and lists of like values ("1, 2 and 3", "Boston and New York").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

try:  # the `router` extra: number words and dates in words (digits and ISO dates without)
    from word2number import w2n
except ImportError:  # pragma: no cover - exercised only without the extra
    w2n = None

from .switches import ABLATED
from .text import STOPWORDS


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str  # number, date, time, email, url, path, boolean, quoted, name, phrase
    value: Any
    text: str
    unit: str = ""  # the word after a number ("5 years" -> "years")
    percent: bool = False
    group: int = -1  # index of the list of like values the span belongs to, -1 alone

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DATE = re.compile(
    rf"\b(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}|\d{{1,2}}-\d{{1,2}}-\d{{4}}|\d{{4}}/\d{{1,2}}/\d{{1,2}}"
    rf"|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}(?:,?\s+\d{{4}})?"
    rf"|{_MONTHS}\s+\d{{4}}"
    rf"|today|tomorrow|yesterday|(?:next|last|this)\s+(?:{_DAYS}|week|month|year)|{_DAYS})\b",
    re.IGNORECASE,
)
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)(?!\w)|\b(\d{1,2}):(\d{2})\b", re.I)
_TERM = (
    r"(?:[a-z]{2,6}\([^()]*(?:\([^()]*\)[^()]*)*\)|\d*\.?\d*[A-Za-z]\d*(?:(?:\*\*|\^)\d+)?"
    r"|\d+(?:\.\d+)?)"
)
_EXPRESSION = re.compile(
    rf"(?<![\w.])(?:[a-z]\s*=\s*)?-?{_TERM}(?:\s*(?:\*\*|[-+*/^])\s*{_TERM})+(?![\w.])"
    rf"|(?<![\w.])[a-z]{{1,6}}\([^()]*(?:\([^()]*\)[^()]*)*\)"
)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s\"'<>]+[^\s\"'<>.,;:!?)]")
_PATH = re.compile(
    r"\b[A-Za-z]:[\\/][^\s\"']+|(?<![\w/])(?:~|\.{1,2})?(?:/[\w.-]+)+/?|\b[\w-]+\.(?:txt|csv|json|pdf|py|md|png|jpe?g|xlsx?|docx?|log|ya?ml|html?|zip)\b"
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<!\w)'([^']+)'(?!\w)|`([^`]+)`")
_NUMBER = re.compile(
    r"(?<![\w.])(-|\u2212)?([$€£])?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:e([-+]?\d+))?"
    r"(?:(st|nd|rd|th)\b)?(?:\s*(%|percent\b|k\b|thousand\b|million\b|billion\b))?"
    r"([A-Za-zµ°Ω][A-Za-z/²³]{0,5})?(?![\w])",
    re.IGNORECASE,
)
_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
    "thousand",
    "million",
    "billion",
]
_NUMBER_WORD_RUN = re.compile(
    rf"\b(?:{'|'.join(_NUMBER_WORDS)})(?:[\s-]+(?:and\s+)?(?:{'|'.join(_NUMBER_WORDS)}))*\b",
    re.IGNORECASE,
)
_ORDINALS = {"twice": 2, "thrice": 3, "a dozen": 12, "dozen": 12, "half a": 0.5}
_BOOLEAN = re.compile(r"\b(true|false|yes|no)\b", re.IGNORECASE)
_SCALE = {"k": 1e3, "thousand": 1e3, "million": 1e6, "billion": 1e9}
_UNIT_AFTER = re.compile(r"\s*([A-Za-z°][A-Za-z°/²³]*)")
_NAME = re.compile(
    r"(?<![\w'])[A-Z][\w&.-]*(?:(?:\s+(?:of|the|de|la|von|van|del|&)\s+|\s+|-)"
    r"[A-Z][\w'&.-]*)*"
)
_IDENTIFIER = re.compile(
    r"(?<![\w.])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w])|\b[a-z]+[A-Z]\w*\b"
)
_REGION = re.compile(r",\s*([A-Z]{2,3}\b|[A-Z][a-z]+\b(?!\s+[A-Z]))")


def find_spans(text: str) -> list[Span]:
    """Every typed value in ``text``, earlier and more specific kinds first; no two
    spans overlap (a date wins over the numbers inside it, a URL over its path)."""
    found: list[Span] = []

    def add(span: Span) -> None:
        if not any(span.overlaps(other) for other in found):
            found.append(span)

    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        add(Span(m.start(), m.end(), "quoted", inner, inner))
    for m in _EXPRESSION.finditer(text):
        expression = m.group(0).strip()
        if re.search(r"[A-Za-z]", expression) and re.search(r"[-+*/^()=]", expression):
            add(Span(m.start(), m.start() + len(expression), "expression", expression, expression))
    for m in _EMAIL.finditer(text):
        add(Span(m.start(), m.end(), "email", m.group(0), m.group(0)))
    for m in _URL.finditer(text):
        add(Span(m.start(), m.end(), "url", m.group(0), m.group(0)))
    anchor = _anchor(text)
    if anchor is not None:  # "today is Monday April 25th 2023": what relative dates count from
        add(Span(anchor[0], anchor[1], "anchor", anchor[2], text[anchor[0] : anchor[1]]))
    for m in _DATE.finditer(text):
        day = _parse_date(m.group(0), anchor[3] if anchor else None)
        if day is not None:
            add(Span(m.start(), m.end(), "date", day, m.group(0)))
    for m in _TIME.finditer(text):
        clock = _parse_time(m)
        if clock is not None:
            add(Span(m.start(), m.end(), "time", clock, m.group(0)))
    for m in _ADDRESS.finditer(text) if ADDRESSES not in ABLATED else ():
        address = m.group(0).rstrip(" ,.")
        add(Span(m.start(), m.start() + len(address), "name", address, address))
    for m in _PATH.finditer(text):
        if m.group(0).startswith("/") and len(m.group(0)) < 3:
            continue  # a lone slash and a letter ("km/h" is a unit, not a path)
        add(Span(m.start(), m.end(), "path", m.group(0), m.group(0)))
    for span in _numbers(text):
        add(span)
    for m in _BOOLEAN.finditer(text):
        add(Span(m.start(), m.end(), "boolean", m.group(1).lower() in {"true", "yes"}, m.group(0)))
    for m in _IDENTIFIER.finditer(text):
        add(Span(m.start(), m.end(), "identifier", m.group(0), m.group(0)))
    for span in _names(text):
        if LABELS in ABLATED or span.text.lower() not in _BARE_LABELS:  # "bot with ID 'B12'"
            add(unlabelled(span))
    found = sorted((s for s in found if s.kind != "anchor"), key=lambda s: s.start)
    return _group_lists(text, found)


ADDRESSES = "addresses"
_ADDRESS = re.compile(
    r"\b\d+[A-Za-z]?\s+(?:[A-Z][\w.'-]*\s+){1,4}"
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Place|Pl|Court|Ct|"
    r"Square|Sq|Terrace|Highway|Hwy|Parkway|Pkwy)\b\.?"
    r"(?:,\s*[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*)*)*"
)
"""A street address with its house number and the places after it ("2020 Addison Street,
Berkeley, CA, USA"): one value, not a number and a list of names."""
LABELS = "labels"
_BARE_LABELS = frozenset({"id", "no", "nr", "no.", "nr.", "#"})
_LABEL = re.compile(r"(?:id|no\.?|nr\.?|number|num|#)\s*(?=\S*\d)", re.IGNORECASE)


def unlabelled(span: Span) -> Span:
    """``span`` without a label before an identifier ("ID U123456", "No 28473", "number
    456123": the value is what follows the label)."""
    m = _LABEL.match(span.text)
    rest = span.text[m.end() :] if m else ""
    if LABELS in ABLATED or not m or not rest or " " in rest.strip():
        return span
    start = span.start + m.end()
    return Span(start, span.end, span.kind, rest, rest, span.unit, span.percent, span.group)


ANCHORED = "anchored"
_ANCHOR = re.compile(
    rf"\btoday(?:'s date)?\s+is\s+(?:the\s+)?(?:{_DAYS},?\s+(?:the\s+)?)?", re.IGNORECASE
)


def _anchor(text: str) -> tuple[int, int, str, datetime] | None:
    """The date the task says today is (start, end, ISO date, as a datetime): context that
    relative dates count from, not a value of its own."""
    m = _ANCHOR.search(text)
    date = _DATE.match(text, m.end()) if m else None
    if ANCHORED in ABLATED or m is None or date is None:
        return None
    day = _parse_date(date.group(0))
    if day is None:
        return None
    return m.start(), date.end(), day, datetime.strptime(day, "%Y-%m-%d")


def _numbers(text: str) -> list[Span]:
    out: list[Span] = []
    for m in _NUMBER.finditer(text):
        sign, _money, digits, fraction, exponent, _ordinal, scale, attached = m.groups()
        literal = digits.replace(",", "") + (fraction or "")
        value: float = float(literal + (f"e{exponent}" if exponent else ""))
        if sign:
            value = -value
        scale_word = (scale or "").lower()
        percent = scale_word in {"%", "percent"}
        if scale_word == "k" and not _money:
            continue  # "300K" is kelvin as often as thousands: only "$50k" is money
        if scale_word in _SCALE:
            value *= _SCALE[scale_word]
        is_int = fraction is None and exponent is None and value.is_integer()
        number: int | float = int(value) if is_int else value
        literal_text = m.group(0).strip()
        if attached:
            unit = attached.lower()
            span = Span(m.start(), m.end(), "number", number, literal_text, unit=unit)
            out.append(span)
            continue
        out.append(_with_unit(text, m.start(), m.end(), number, literal_text, percent))
    for m in _NUMBER_WORD_RUN.finditer(text) if w2n is not None else ():
        try:
            number = w2n.word_to_num(m.group(0))
        except ValueError:
            continue
        out.append(_with_unit(text, m.start(), m.end(), number, m.group(0), False, spelled=True))
    for word, number in _ORDINALS.items():
        for m in re.finditer(rf"\b{word}\b", text, re.IGNORECASE):
            out.append(
                _with_unit(text, m.start(), m.end(), number, m.group(0), False, spelled=True)
            )
    return out


def _with_unit(
    text: str, start: int, end: int, value: Any, literal: str, percent: bool, spelled: bool = False
) -> Span:
    unit = ""
    after = _UNIT_AFTER.match(text, end)
    if after and not percent and after.group(1).lower() not in STOPWORDS:
        unit = after.group(1).lower()
    kind = "word number" if spelled else "number"
    return Span(start, end, kind, value, literal, unit=unit, percent=percent)


def _names(text: str) -> list[Span]:
    """Capitalised word runs ("New York", "Statue of Liberty"), a sentence's first word
    only when it is no common word, extended by ", Region" ("Boston, MA")."""
    out: list[Span] = []
    for m in _NAME.finditer(text):
        tokens = [(t.start() + m.start(), t.end() + m.start(), t.group(0))
                  for t in re.finditer(r"[^\s-]+", m.group(0))]  # fmt: skip
        for index, token in enumerate(tokens[:-1]):
            if re.search(r"[a-z]{2}[.!?]$", token[2]):  # "York." ends a sentence: no "York. How"
                tokens = tokens[: index + 1]
                break
        while tokens and tokens[0][2].lower().rstrip(".,'") in STOPWORDS | _COMMON_STARTS:
            tokens.pop(0)
        if len(tokens) == 1 and re.search(r"(?:^|[.!?:]\s+|\n)\W*$", text[: tokens[0][0]]):
            continue  # a sentence's first word alone: most often a verb ("Train", "Run")
        while tokens and tokens[-1][2].lower() in _JOINERS:
            tokens.pop()
        if not tokens:
            continue
        start, end = tokens[0][0], tokens[-1][1]
        if text[start:end].endswith(("'s", "\u2019s")):  # "Albert Einstein's": the name
            end -= 2
        while end > start and text[end - 1] in ".,'":
            end -= 1
        region = _REGION.match(text, end)
        if (
            region
            and region.group(1).lower() not in STOPWORDS
            and not _in_list(text, start, region)
        ):
            end = region.end()
        if end > start:
            out.append(Span(start, end, "name", text[start:end], text[start:end]))
    return out


def _in_list(text: str, start: int, region: re.Match[str]) -> bool:
    """Whether ", Word" continues a list of names ("Apple, Microsoft, Amazon") rather than
    naming a region ("Boston, Massachusetts"): a name after a comma, or a comma after the
    word, is a list item; a two-letter code ("Boston, MA") is always a region."""
    if re.fullmatch(r"[A-Z]{2,3}", region.group(1)):
        return False
    after = re.match(r"\s*,\s*([A-Z][\w']*)", text[region.end() :])
    listed = after is not None and after.group(1).lower() not in _COMMON_STARTS | STOPWORDS
    return listed or bool(re.search(r",\s*$", text[:start]))


_JOINERS = frozenset({"of", "the", "de", "la", "and", "&", "von", "van", "del"})
_COMMON_STARTS = frozenset(
    [
        "find",
        "calculate",
        "compute",
        "get",
        "give",
        "show",
        "tell",
        "list",
        "search",
        "retrieve",
        "fetch",
        "book",
        "create",
        "make",
        "convert",
        "check",
        "determine",
        "estimate",
        "predict",
        "identify",
        "provide",
        "return",
        "send",
        "set",
        "update",
        "delete",
        "add",
        "remove",
        "generate",
        "plan",
        "order",
        "buy",
        "what",
        "who",
        "how",
        "where",
        "when",
        "which",
        "why",
        "can",
        "could",
        "would",
        "will",
        "is",
        "are",
        "do",
        "does",
        "please",
        "hi",
        "hello",
        "hey",
        "i",
        "i'm",
        "i'd",
        "i've",
        "my",
        "we",
        "our",
        "you",
        "your",
        "let",
        "help",
        "look",
        "need",
        "want",
        "like",
        "am",
        "in",
        "on",
        "at",
        "for",
        "by",
        "from",
        "to",
        "the",
        "a",
        "an",
        "and",
        "or",
        "if",
        "so",
    ]
)


def _parse_date(literal: str, base: datetime | None = None) -> str | None:
    """``literal`` as an ISO date (YYYY-MM-DD), or None when it is no date; relative
    dates count from ``base`` (today when None)."""
    if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", literal):
        year, month, day = (int(p) for p in literal.split("-"))
        try:
            return datetime(year, month, day).strftime("%Y-%m-%d")
        except ValueError:
            return None
    try:
        import dateparser
    except ImportError:  # pragma: no cover - without the `router` extra: ISO dates only
        return None
    settings: dict[str, Any] = {"PREFER_DATES_FROM": "future", "DATE_ORDER": "MDY"}
    if base is not None:
        settings["RELATIVE_BASE"] = base
    parsed = dateparser.parse(literal, languages=["en"], settings=settings)
    return parsed.strftime("%Y-%m-%d") if parsed else None


def _parse_time(m: re.Match[str]) -> str | None:
    hour_text, minute_text, meridiem, hour24, minute24 = m.groups()
    if meridiem:
        hour, minute = int(hour_text), int(minute_text or 0)
        if not 1 <= hour <= 12:
            return None
        pm = meridiem.lower().startswith("p")
        hour = hour % 12 + (12 if pm else 0)
    else:
        hour, minute = int(hour24), int(minute24)
    if hour > 23 or minute > 59:
        return None
    return f"{hour:02d}:{minute:02d}"


def _group_lists(text: str, spans: list[Span]) -> list[Span]:
    """Mark runs of like spans joined by ``,`` / ``and`` / ``or`` as one list each."""
    out = list(spans)
    group = 0
    i = 0
    while i < len(out):
        j = i
        while j + 1 < len(out) and out[j + 1].kind == out[i].kind:
            between = text[out[j].end : out[j + 1].start]
            if not re.fullmatch(r"\s*(?:,|;|and|or|&|,\s*and|,\s*or|\s)\s*", between):
                break
            if (
                out[i].kind == "number"
                and out[j + 1].unit
                and out[i].unit
                and out[j + 1].unit != out[i].unit
            ):
                break
            j += 1
        paired = j == i + 1 and re.search(r"\bbetween\s*$", text[: out[i].start], re.I)
        if j > i and not paired:
            for index in range(i, j + 1):
                out[index] = _regroup(out[index], group)
            group += 1
        i = j + 1
    return out


def _regroup(span: Span, group: int) -> Span:
    return Span(
        span.start, span.end, span.kind, span.value, span.text, span.unit, span.percent, group
    )
