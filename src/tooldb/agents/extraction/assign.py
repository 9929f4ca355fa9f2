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
from .values import Span, find_spans, unlabelled

STRONG = 4.0
NUMBERS = frozenset({"number", "word number"})
_LINK = re.compile(
    r"[^\w,]*(?:(?:is|are|of|=|:|to|as|was|equals?|equal to|set to|being|with|a|an|the|about|"
    r"around|approximately|roughly|be|for|by|per|on|at|up to)\W+)*[^\w,]*",
    re.IGNORECASE,
)
_TEXT_CUES = ("text", "query", "message", "content", "prompt", "question", "sentence", "input",
              "keyword", "search", "term", "statement", "answer")  # fmt: skip
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
_PHRASE_STOP = re.compile(
    r"[,.;:!?()\"]|\b(?:and|or|but|with|from|to|in|on|at|for|by|of|that|which|who|if|"
    r"when|where|using|based|within|between|into|after|before|during|than)\b",
    re.IGNORECASE,
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
    tool's name and description) names words that are no values for free-text fallbacks."""
    params = params_of(schema)
    found = find_spans(task) if spans is None else spans
    out = Extraction()
    used: list[Span] = []
    lowered = task.lower()

    def take(param: Param, value: Any, span: Span | None, why: str) -> None:
        out.arguments[param.name] = value
        out.notes[param.name] = why
        if span is not None:
            used.append(span)
            out.spans[param.name] = span

    def free(span: Span) -> bool:
        return not any(span.overlaps(u) for u in used)

    # 1. choices: enum values and the options a description quotes
    for param in params if "choices" not in ABLATED else ():
        choice = choice_of(task, lowered, param, free)
        if choice is not None:
            take(param, choice[0], choice[1], choice[2])
            out.strong.add(param.name)
            alternatives = listed_choices(task, param, choice[1])
            if alternatives:
                out.alternatives[param.name] = [option for option, _ in alternatives]
                used.extend(span for _, span in alternatives)
    # 1b. a command parameter: the command the task says to use ("using docker ps")
    for param in params if COMMANDS not in ABLATED else ():
        command = _command(task, param) if param.name not in out.arguments else None
        if command is not None:
            take(param, command.value, command, f"the command after {command.unit!r}")
            out.strong.add(param.name)
    # 2. strong evidence, best first
    pairs: list[tuple[float, int, int, Param, Span, Any, str]] = []
    for p_index, param in enumerate(params):
        if param.name in out.arguments or param.kind == "array":
            continue
        for span in found:
            value = _convert(param, span)
            if value is None:
                continue
            score, why = _evidence(task, param, span)
            pairs.append((score, -span.start, -p_index, param, span, value, why))
    pairs.sort(key=lambda p: (p[0], p[1], p[2]), reverse=True)
    for score, _, _, param, span, value, why in pairs:
        if score >= STRONG and param.name not in out.arguments and free(span):
            take(param, value, span, why)
            out.strong.add(param.name)
    # 3. arrays: a list of like values (the one named, else the first that fits)
    for param in params if "lists" not in ABLATED else ():
        if param.kind == "array" and param.name not in out.arguments:
            listed = _list_value(task, param, found, free)
            if listed is not None:
                out.arguments[param.name], out.notes[param.name] = listed[0], listed[1]
                used.extend(listed[2])
    # 4. required parameters still empty: the remaining values that fit, in order
    #    (numbers in digits before spelled ones: "two numbers, 36 and 48")
    plain = sorted(found, key=lambda s: (s.kind == "word number", s.start))
    for param in params if "order" not in ABLATED else ():
        if not param.required or param.name in out.arguments:
            continue
        for span in plain:
            value = _convert(param, span)
            if value is not None and free(span) and _plain_fit(param, span):
                take(param, value, span, f"{span.kind} {span.text!r}, the next that fits")
                break
    # 4b. optional numbers take what numbers are left, bare ones only ("add 2 and 3")
    for param in params if "order" not in ABLATED else ():
        if param.required or param.name in out.arguments or param.kind not in {"integer", "number"}:
            continue
        for span in found:
            value = _convert(param, span)
            if value is not None and free(span) and span.kind == "number" and not span.unit:
                take(param, value, span, f"number {span.text!r}, the next left")
                break
    # 5. free text for a required string: the phrase after its cue word, else the task
    topic_stems = content_stems(topic)
    sole = sum(p.required for p in params) == 1  # the task is the input of a one-input tool
    for param in params if "phrases" not in ABLATED else ():
        if not param.required or param.name in out.arguments or param.kind not in {"string", "any"}:
            continue
        phrase = _cue_phrase(task, param, topic_stems, free)
        if phrase is not None and not (_place_phrase(param, phrase) and _id_fits(param, phrase)):
            phrase = None
        if phrase is None or task[phrase.end :].lstrip(" '\"").startswith(":"):
            phrase = _after_colon(task, param) or phrase  # "a note saying this: …"
        if phrase is not None:
            take(param, phrase.value, phrase, f"the phrase after {phrase.unit!r}")
        elif param.says(*_TEXT_CUES) and sole and _whole_text_fits(param):
            take(param, task.strip(), None, "the task text (the parameter asks for text)")
    # 6. a boolean whose name's words the task writes is switched on ("avoid tolls")
    for param in params if "flags" not in ABLATED else ():
        if param.kind == "boolean" and param.name not in out.arguments:
            flag = _flag(task, param)
            if flag is not None:
                out.arguments[param.name], out.notes[param.name] = flag
    out.missing = [
        p.name for p in params
        if p.required and p.name not in out.arguments and "default" not in p.schema
    ]  # fmt: skip
    return out


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


COMMANDS = "commands"
_COMMAND = re.compile(
    r"\b(using|use|run|execute)\s+(?:the\s+)?(?:(?:command|instruction)\s+(?:called\s+|named\s+)?)?"
    r"(?!the\b|a\b|an\b|my\b|your\b|it\b|this\b)(\S.*?)"
    r"(?:\s+(?:command|instruction))?(?:\s+to\s+\w.*)?\s*[.?!]?\s*$",
    re.IGNORECASE,
)


def _command(task: str, param: Param) -> Span | None:
    """For a parameter that takes a shell command, the words after "using"/"use"/"run"
    to the end of the sentence ("check the version using docker --version", "use docker ps
    to find out"), "the echo %date% command" without "command"."""
    names = {w.lower() for w in param.name_words}
    if param.kind not in {"string", "any"} or not names & {"command", "cmd", "instruction"}:
        return None
    m = _COMMAND.search(task)
    if m is None:
        return None
    value = m.group(2).strip()
    return Span(m.start(2), m.start(2) + len(value), "phrase", value, value, unit=m.group(1))


TEXT_TAIL = "text_tail"
_SENTENCE_END = re.compile(r"[.?!;]\s|[.?!;]?$|\n")
_AFTER_COLON = re.compile(r":\s*([^:\n]*\w[^:\n]*?)[\s.?!]*$")


def _text_named(param: Param, word: str) -> bool:
    """Whether ``word`` is part of the name of a parameter that asks for free text: its
    value then runs to the end of the sentence ("add todo with content go to sleep at
    9 pm"), prepositions and all."""
    named = {stem(w) for w in param.name_words}
    return TEXT_TAIL not in ABLATED and stem(word) in named and _asks_text(param)


def _asks_text(param: Param) -> bool:
    """Whether the parameter's own name asks for free text ("content", "message")."""
    return bool({stem(w) for w in param.name_words} & {stem(c) for c in _TEXT_CUES})


def _after_colon(task: str, param: Param) -> Span | None:
    """The words after the task's last colon, for a parameter that asks for text ("create
    a todo with these words: go shopping at 9 pm")."""
    m = _AFTER_COLON.search(task)
    if TEXT_TAIL in ABLATED or not _asks_text(param) or m is None:
        return None
    value = m.group(1).strip().strip("'\"")
    if len(value.split()) < 2:
        return None
    return Span(m.start(1), m.end(1), "phrase", value, value, unit=":")


def _cue_phrase(task: str, param: Param, topic: set[str], free: Any) -> Span | None:
    """The words after the parameter's cue word ("the company Google", "genre: jazz"),
    up to the next preposition or punctuation; topic words alone are no value."""
    for m in re.finditer(r"[A-Za-z][\w'-]*", task):
        if stem(m.group(0)) not in param.cue_stems or m.group(0).lower() in STOPWORDS:
            continue
        rest = task[m.end() :]
        lead = re.match(r"\s*(?:(?:of|is|are|=|:|named|called|for|about|on|the|a|an|as)\s+)*", rest)
        offset = m.end() + (lead.end() if lead else 0)
        tail = _text_named(param, m.group(0))
        stop = (_SENTENCE_END if tail else _PHRASE_STOP).search(task, offset)
        end = stop.start() if stop else len(task)
        phrase = task[offset:end].strip()
        chunk = phrase.split()[: None if tail else 5]
        if not chunk or all(w.lower() in STOPWORDS for w in chunk):
            continue
        if content_stems(" ".join(chunk)) <= topic | param.cue_stems:
            continue
        value = " ".join(chunk).strip("'\"")
        span = Span(offset, offset + len(" ".join(chunk)), "phrase", value, value, unit=m.group(0))
        span = unlabelled(span)
        if free(span):
            return span
    return None
