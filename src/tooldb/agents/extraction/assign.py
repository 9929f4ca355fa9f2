"""Which value in the sentence goes to which parameter, and why.

Every (parameter, value) pair that fits the parameter's type gets a score from the
evidence for it, strongest first: the parameter's name written before the value
("base of 10", ``depth=5``), the value's unit named by the parameter ("500 grams" for
"Mass in grams"), a relational phrase ("from X to Y", "between X and Y") and a start-
or end-like parameter, the kind of value the parameter's words ask for (a date for a
``date``, an email for an ``email``), a name after "in"/"at" for a place. Strong pairs
are taken greedily; the required parameters still empty then take the remaining values
that fit, in the order of the sentence. Optional parameters need strong evidence: a
guess there is worse than the default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .choices import choice_of, listed_choices
from .phrases import COMMANDS, TEXT_CUES, after_colon, command_after, cue_phrase
from .switches import ABLATED
from .text import (
    END_WORDS,
    START_WORDS,
    STOP_STEMS,
    STOPWORDS,
    Param,
    content_stems,
    params_of,
    stem,
    words,
)
from .values import Span, find_spans

STRONG = 4.0
NUMBERS = frozenset({"number", "word number"})
_LINK = re.compile(
    r"[^\w,]*(?:(?:is|are|of|=|:|to|as|was|equals?|equal to|set to|being|with|a|an|the|about|"
    r"around|approximately|roughly|be|for|by|per|on|at|up to)\W+)*[^\w,]*",
    re.IGNORECASE,
)
_PLACE_CUES = ("location", "city", "place", "country", "region", "address", "area", "state",
               "destination", "origin", "venue", "town")  # fmt: skip
_MAKER_CUES = ("artist", "author", "creator", "composer", "director", "writer", "band",
               "performer", "singer", "painter", "publisher", "maker", "manufacturer",
               "brand")  # fmt: skip
"""Who made a thing: the name after "by" ("tracks by Käärijä", "a novel by Tolstoy")."""
_KIND_CUES = (
    ("email", ("email", "mail")),
    ("url", ("url", "link", "endpoint", "website", "uri", "site")),
    ("path", ("path", "file", "directory", "folder", "filename")),
)


@dataclass
class Extraction:
    """Arguments, why each was chosen, the required parameters not found, and the span
    behind each argument (the router expands list-valued spans into several calls)."""

    arguments: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    spans: dict[str, Span] = field(default_factory=dict)
    strong: set[str] = field(default_factory=set)  # named, unit, relation, enum: not by order
    alternatives: dict[str, list[Any]] = field(default_factory=dict)  # "rock and jazz"


def extract_arguments(
    task: str, schema: dict[str, Any], *, topic: str = "", spans: list[Span] | None = None
) -> Extraction:
    """Arguments for ``schema`` (a JSON Schema object) from ``task``. ``topic`` (the
    tool's name and description) names words that are no values for free-text fallbacks.
    The stages run strongest evidence first; a span one stage takes is not free for the
    next."""
    assigner = _Assigner(task, params_of(schema), find_spans(task) if spans is None else spans)
    if "choices" not in ABLATED:
        assigner.choices()
    if COMMANDS not in ABLATED:
        assigner.commands()
    assigner.strong_evidence()
    if "lists" not in ABLATED:
        assigner.arrays()
    if "order" not in ABLATED:
        assigner.by_order()
    if "phrases" not in ABLATED:
        assigner.free_text(content_stems(topic))
    if "flags" not in ABLATED:
        assigner.flags()
    out, params = assigner.out, assigner.params
    out.missing = [
        p.name for p in params
        if p.required and p.name not in out.arguments and "default" not in p.schema
    ]  # fmt: skip
    return out


class _Assigner:
    """One task's extraction in progress: the arguments taken and the spans they used."""

    def __init__(self, task: str, params: list[Param], found: list[Span]) -> None:
        self.task, self.params, self.found = task, params, found
        self.lowered = task.lower()
        self.out = Extraction()
        self.used: list[Span] = []

    def take(self, param: Param, value: Any, span: Span | None, why: str) -> None:
        self.out.arguments[param.name] = value
        self.out.notes[param.name] = why
        if span is not None:
            self.used.append(span)
            self.out.spans[param.name] = span

    def free(self, span: Span) -> bool:
        return not any(span.overlaps(u) for u in self.used)

    def open(self, param: Param) -> bool:
        return param.name not in self.out.arguments

    def choices(self) -> None:
        """Enum values and the options a description quotes; a list of them is kept as
        alternatives (one call each)."""
        for param in self.params:
            choice = choice_of(self.task, self.lowered, param, self.free)
            if choice is not None:
                self.take(param, choice[0], choice[1], choice[2])
                self.out.strong.add(param.name)
                alternatives = listed_choices(self.task, param, choice[1])
                if alternatives:
                    self.out.alternatives[param.name] = [option for option, _ in alternatives]
                    self.used.extend(span for _, span in alternatives)

    def commands(self) -> None:
        """A command parameter: the command the task says to use ("using docker ps")."""
        for param in self.params:
            command = command_after(self.task, param) if self.open(param) else None
            if command is not None:
                self.take(param, command.value, command, f"the command after {command.unit!r}")
                self.out.strong.add(param.name)

    def strong_evidence(self) -> None:
        """Named values, units, relations: every (parameter, span) pair scored, the best
        taken first."""
        pairs: list[tuple[float, int, int, Param, Span, Any, str]] = []
        for p_index, param in enumerate(self.params):
            if not self.open(param) or param.kind == "array":
                continue
            for span in self.found:
                value = _convert(param, span)
                if value is None:
                    continue
                score, why = _evidence(self.task, param, span)
                pairs.append((score, -span.start, -p_index, param, span, value, why))
        pairs.sort(key=lambda p: (p[0], p[1], p[2]), reverse=True)
        for score, _, _, param, span, value, why in pairs:
            if score >= STRONG and self.open(param) and self.free(span):
                self.take(param, value, span, why)
                self.out.strong.add(param.name)

    def arrays(self) -> None:
        """A list of like values (the one named, else the first that fits)."""
        for param in self.params:
            if param.kind == "array" and self.open(param):
                listed = _list_value(self.task, param, self.found, self.free)
                if listed is not None:
                    self.out.arguments[param.name], self.out.notes[param.name] = listed[:2]
                    self.used.extend(listed[2])

    def by_order(self) -> None:
        """Required parameters still empty take the remaining values that fit, in order
        (numbers in digits before spelled ones: "two numbers, 36 and 48"); then optional
        numbers take the bare numbers left ("add 2 and 3")."""
        plain = sorted(self.found, key=lambda s: (s.kind == "word number", s.start))
        for param in self.params:
            if not param.required or not self.open(param):
                continue
            for span in plain:
                value = _convert(param, span)
                if value is not None and self.free(span) and _plain_fit(param, span):
                    self.take(param, value, span, f"{span.kind} {span.text!r}, the next that fits")
                    break
        for param in self.params:
            if param.required or not self.open(param) or param.kind not in {"integer", "number"}:
                continue
            for span in self.found:
                value = _convert(param, span)
                if (
                    value is not None
                    and self.free(span)
                    and span.kind == "number"
                    and not span.unit
                ):
                    self.take(param, value, span, f"number {span.text!r}, the next left")
                    break

    def free_text(self, topic_stems: set[str]) -> None:
        """A required string still empty: the phrase after its cue word, else (for the one
        input of a text tool) the task itself."""
        task = self.task
        sole = sum(p.required for p in self.params) == 1
        for param in self.params:
            if not param.required or not self.open(param) or param.kind not in {"string", "any"}:
                continue
            phrase = cue_phrase(task, param, topic_stems, self.free)
            if phrase is not None and not (
                _place_phrase(param, phrase) and _id_fits(param, phrase)
            ):
                phrase = None
            if phrase is None or task[phrase.end :].lstrip(" '\"").startswith(":"):
                phrase = after_colon(task, param) or phrase  # "a note saying this: …"
            if phrase is not None:
                self.take(param, phrase.value, phrase, f"the phrase after {phrase.unit!r}")
            elif param.says(*TEXT_CUES) and sole and _whole_text_fits(param):
                self.take(param, task.strip(), None, "the task text (the parameter asks for text)")

    def flags(self) -> None:
        """A boolean whose name's words the task writes is switched on ("avoid tolls")."""
        for param in self.params:
            if param.kind == "boolean" and self.open(param):
                flag = _flag(self.task, param)
                if flag is not None:
                    self.out.arguments[param.name], self.out.notes[param.name] = flag


_NEGATION = re.compile(r"\b(?:no|not|without|never|don't|do not|exclude|excluding)\b", re.I)
_FLAG_VERBS = frozenset(
    [
        "is",
        "include",
        "including",
        "use",
        "enable",
        "with",
        "has",
        "should",
        "allow",
        "show",
        "return",
    ]
)


def _whole_text_fits(param: Param) -> bool:
    """Whether the task as a whole may be the value: a text parameter may take it, a
    place, URL, email or path is never a whole sentence."""
    if "task text" in ABLATED:
        return False
    if "places" in ABLATED:
        return True
    return not _is_place(param) and _format_kind(param) is None


def _is_place(param: Param) -> bool:
    """Whether the parameter asks for a place (whole words: "statement" is no "state")."""
    said = set(param.name_words) | set(words(param.description))
    return any(cue in said or f"{cue}s" in said for cue in _PLACE_CUES)


def _flag(task: str, param: Param) -> tuple[bool, str] | None:
    """True when every content word of a boolean's name is in the task (False when a
    negation comes just before them); None when the task does not mention it."""
    wanted = [w for w in param.name_words if w not in STOPWORDS and w not in _FLAG_VERBS]
    if not wanted:
        return None
    stems = {stem(w) for w in wanted}
    positions = [m.start() for m in re.finditer(r"[A-Za-z]+", task) if stem(m.group(0)) in stems]
    seen = {stem(m.group(0)) for m in re.finditer(r"[A-Za-z]+", task)} & stems
    if seen != stems or not positions:
        return None
    before = task[max(0, min(positions) - 25) : min(positions)]
    if _NEGATION.search(before):
        return False, f"{' '.join(wanted)!r} negated in the task"
    return True, f"the task asks for {' '.join(wanted)!r}"


def _convert(param: Param, span: Span) -> Any:
    """``span``'s value as ``param`` wants it, or None when it does not fit the type (or
    is none of the parameter's enum values)."""
    value = _typed(param, span)
    if value is None or not param.enum or ENUM_ONLY in ABLATED:
        return value
    return next((o for o in param.enum if str(o).lower() == str(value).lower()), None)


ENUM_ONLY = "enum_only"


def _typed(param: Param, span: Span) -> Any:
    """``span``'s value as ``param``'s type wants it, or None."""
    kind = param.kind
    if span.kind == "choice":
        return None
    wanted = _format_kind(param)
    if wanted is not None and span.kind != wanted:
        return None  # a URL parameter takes a URL, not a city
    if kind == "integer":
        if span.kind in NUMBERS and isinstance(span.value, int) and not span.percent:
            return span.value
        return None
    if kind == "number":
        if span.kind not in NUMBERS:
            return None
        value = span.value
        # a rate given in percent is a fraction unless the parameter says percent
        fractional = param.says("decimal", "fraction", "ratio", "rate", "probability")
        if span.percent and fractional and not param.says("percent", "percentage"):
            return round(value / 100, 10)
        return value
    if kind == "boolean":
        return span.value if span.kind == "boolean" else None
    if kind in {"string", "any"}:
        if span.kind == "boolean" or (span.kind in NUMBERS and kind == "string"):
            return span.text if span.kind == "number" and _wants_code(param) else None
        if span.kind == "date":
            return _format_date(span.value, param.description)
        if span.kind == "expression" and "python" in param.description.lower():
            return str(span.value).replace("^", "**")
        return span.value if isinstance(span.value, str) else None
    return None


_FORMATS = {"uri": "url", "url": "url", "email": "email", "date": "date", "time": "time",
            "idn-email": "email", "uri-reference": "url"}  # fmt: skip


def _format_kind(param: Param) -> str | None:
    """The kind of value a string parameter's ``format`` (or its name) demands, if any."""
    declared = param.schema.get("format")
    if isinstance(declared, str) and declared in _FORMATS:
        return _FORMATS[declared]
    if param.kind != "string":
        return None
    last = param.name_words[-1] if param.name_words else ""
    return {"url": "url", "uri": "url", "email": "email", "endpoint": "url"}.get(last)


def _wants_code(param: Param) -> bool:
    return param.says("id", "code", "zip", "phone", "number", "identifier", "postal", "pin")


def _format_date(iso: str, description: str) -> str:
    """An ISO date in the layout the description shows (MM/DD/YYYY, DD-MM-YYYY ...)."""
    layout = re.search(r"\b(YYYY|MM|DD)([-/. ])(YYYY|MM|DD)\2(YYYY|MM|DD)\b", description, re.I)
    if not layout:
        return iso
    year, month, day = iso.split("-")
    parts = {"YYYY": year, "MM": month, "DD": day}
    sep = layout.group(2)
    return sep.join(parts[layout.group(i).upper()] for i in (1, 3, 4))


def _evidence(task: str, param: Param, span: Span) -> tuple[float, str]:
    """How strongly the sentence ties ``span`` to ``param``, and the reason in words."""
    before = task[max(0, span.start - 60) : span.start]
    named = _named_before(before, param) if "names" not in ABLATED else ""
    if named:
        return 10.0, f"named: {named}{task[span.start : span.end]!r}"
    role = _role_after(task[span.end : span.end + 40], param, span.kind not in NUMBERS)
    if role:
        return 9.0, f"{span.text!r} {role}"
    for kind, cues in _KIND_CUES if "kinds" not in ABLATED else ():
        if span.kind == kind and param.says(*cues):
            return 7.0, f"{kind} {span.text!r}"
    if span.unit and stem(span.unit) in param.cue_stems - STOP_STEMS and "units" not in ABLATED:
        return 8.0, f"{span.text} {span.unit}: the unit the parameter names"
    relation = _relation(before, param) if "relations" not in ABLATED else ""
    if relation:
        return 6.0, f"{relation} {span.text!r}"
    if "kinds" in ABLATED:
        return 1.0, f"{span.kind} {span.text!r}"
    if span.kind == "date" and (
        param.says("date", "day", "when", "birthday") or "YYYY" in param.description
    ):
        return 5.0, f"date {span.text!r} for a date parameter"
    if span.kind == "time" and param.says("time", "hour", "clock"):
        return 5.0, f"time {span.text!r} for a time parameter"
    if (
        span.kind == "name"
        and param.says(*_PLACE_CUES)
        and re.search(r"\b(?:in|at|near|around|of|for)\s*$", before, re.I)
        and not _calendar(span)
    ):
        return 4.5, f"place {span.text!r} after {before.split()[-1]!r}"
    if (
        span.kind == "name"
        and param.says(*_MAKER_CUES)
        and re.search(r"\bby\s*$", before, re.I)
        and "makers" not in ABLATED
    ):
        return 4.5, f"maker {span.text!r} after 'by'"
    formula = param.says("function", "expression", "equation", "formula", "polynomial")
    if span.kind == "expression" and formula:
        return 5.0, f"expression {span.text!r}"
    if span.kind == "quoted":
        return 2.0, f"quoted {span.text!r}"
    return 1.0, f"{span.kind} {span.text!r}"


ROLES = "roles"
_ROLE = re.compile(r"\s*,?\s*(?:as|in|for)\s+(?:the|a|an|my|its|his|her|their)\s+(\w+)", re.I)


def _role_after(after: str, param: Param, text: bool) -> str:
    """The parameter's name as the role written after a name ("David Leitch as the
    director", "Alex King in the cast"), or right after a text value ("the Comic
    genre", "a 'Plus' type")."""
    if ROLES in ABLATED:
        return ""
    m = _ROLE.match(after)
    named = {stem(w) for w in param.name_words if len(w) > 2}
    if m is not None and stem(m.group(1)) in named:
        return m.group(0).strip(" ,")
    m = _NAME_AFTER.match(after) if text else None  # the name's head noun: "genre", "type"
    head = param.name_words[-1].lower() if param.name_words else ""
    if m is None or head in STOPWORDS or len(head) < 3 or stem(m.group(1)) != stem(head):
        return ""
    return m.group(0).strip(" ,'\"")


_NAME_AFTER = re.compile(r"['\"]?\s+(\w+)")


def _named_before(before: str, param: Param) -> str:
    """The parameter's name (or one of its words) written just before a value, with only
    linking words between: "base of ", "a=", "number of trees: "."""
    tail = before[-40:]
    if len(param.name_words) > 1 and "names" not in ABLATED:  # the whole name: "docket number"
        phrase = r"\W*".join(re.escape(w) for w in param.name_words)  # "column count", columnCount
        whole = re.search(rf"\b{phrase}s?(?=\W)", tail, re.IGNORECASE)
        if whole and _LINK.fullmatch(tail[whole.end() :]):
            return tail[whole.start() :]
    candidates = [w for w in param.name_words if len(w) > 1 and w not in STOPWORDS] or list(
        param.name_words
    )
    for m in reversed(list(re.finditer(r"[A-Za-z][A-Za-z0-9]*", tail))):
        if not _LINK.fullmatch(tail[m.end() :]):
            continue
        word = m.group(0).lower()
        if any(stem(word) == stem(c) and (len(c) > 1 or word == c) for c in candidates):
            return tail[m.start() : m.end()] + tail[m.end() :]
    return ""


def _relation(before: str, param: Param) -> str:
    """ "from X" / "between X" for a start-like parameter, "to Y" / "and Y" after
    "between X" / "until Y" for an end-like one."""
    last = re.search(r"(\w+)\W*(?:the\s+|a\s+)?$", before.lower())
    if last is None:
        return ""
    word = last.group(1)
    starts = {stem(w) for w in START_WORDS} & param.cue_stems
    ends = {stem(w) for w in END_WORDS} & param.cue_stems
    if word in {"from", "between", "since"} and starts and not ends:
        return f"'{word}' for a start"
    if word in {"to", "until", "till", "through"} and ends and not starts:
        return f"'{word}' for an end"
    if word == "and" and ends and re.search(r"\bbetween\b", before.lower()):
        return "'between … and' for an end"
    return ""


def _plain_fit(param: Param, span: Span) -> bool:
    """Whether an unnamed value may fill a required parameter by order alone: numbers
    fill numbers; for strings, names, quotes, dates, emails, URLs and paths."""
    if param.kind in {"integer", "number", "boolean"}:
        return True
    if span.kind in {"date", "time"}:  # a time is no todo's text: only where asked for
        return param.says("date", "day", "time", "when", "start", "end", "hour") or (
            "YYYY" in param.description or "HH" in param.description
        )
    if param.says(*_PLACE_CUES) and (_calendar(span) or not _placelike(span)):
        return False
    if not _id_fits(param, span):
        return False
    return span.kind in {"name", "quoted", "date", "time", "email", "url", "path", "identifier",
                         "expression"}  # fmt: skip


PLACE_SHAPE = "place_shape"
_NO_PLACE = re.compile(r".?|.*_.*|[\w-]+(?:\.[\w-]+)*\.[a-z]{2,6}|[^A-Za-z]*", re.DOTALL)


def _placelike(span: Span) -> bool:
    """Whether a value could be a place: not one letter, no identifier ("api_key_2"),
    no bare domain ("downloads.com"), some letters."""
    return PLACE_SHAPE in ABLATED or not _NO_PLACE.fullmatch(str(span.value))


def _place_phrase(param: Param, phrase: Span) -> bool:
    """Whether a phrase may fill a place parameter: place names are written capitalised
    ("weather data" gives no place, "weather in Oslo" does)."""
    if "place_case" in ABLATED or not param.says(*_PLACE_CUES):
        return True
    return phrase.text[:1].isupper() or phrase.text[:1].isdigit()


ID_SHAPE = "id_shape"


def _id_fits(param: Param, span: Span) -> bool:
    """Whether a value taken by order or after a cue word may be an identifier: for a
    parameter named "… id", a word of plain prose ("shoes", "did not provide a query") is
    none; an id has a digit, a separator or capitals inside ("U123", "main_db", "eMan")."""
    if ID_SHAPE in ABLATED or not param.name_words or param.name_words[-1].lower() != "id":
        return True
    if span.kind not in {"name", "phrase"}:
        return True
    text = str(span.value)
    return bool(re.search(r"\d|[_./@:-]|\w[A-Z]", text))


CALENDAR = "calendar"
_CALENDAR_WORD = re.compile(
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|monday|tuesday|wednesday|thursday|friday|saturday|sunday)",
    re.IGNORECASE,
)


def _calendar(span: Span) -> bool:
    """Whether a name is a month or a weekday, which is never a place ("New York in
    December")."""
    return (
        CALENDAR not in ABLATED
        and span.kind == "name"
        and bool(_CALENDAR_WORD.fullmatch(span.text))
    )


def _list_value(
    task: str, param: Param, found: list[Span], free: Any
) -> tuple[list[Any], str, list[Span]] | None:
    item = Param(
        param.name, param.item_kind or "any", {}, True, param.name_words, param.cue_stems, None
    )
    groups: dict[int, list[Span]] = {}
    for span in found:
        if span.group >= 0 and free(span):
            groups.setdefault(span.group, []).append(span)
    ordered = sorted(groups.values(), key=lambda g: -_evidence(task, param, g[0])[0])
    for spans in ordered:
        values = [_convert(item, s) for s in spans]
        if all(v is not None for v in values):
            return values, f"the list {task[spans[0].start : spans[-1].end]!r}", spans
    if param.required:
        loose = [
            s for s in found if free(s) and _convert(item, s) is not None and _plain_fit(item, s)
        ]
        if loose:
            return [_convert(item, s) for s in loose], f"every {item.kind} in the task", loose
    return None
