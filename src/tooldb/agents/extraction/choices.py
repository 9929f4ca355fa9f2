"""Enum values and the options a description quotes, as the task writes them."""

from __future__ import annotations

import re
from typing import Any

from .switches import ABLATED
from .text import Param, stem
from .values import Span


def choice_of(task: str, lowered: str, param: Param, free: Any) -> tuple[Any, Span, str] | None:
    """The enum value (or description-quoted option) the task writes, first in the text."""
    options = list(param.enum) if param.enum is not None else []
    quoted = not options and param.kind == "string"
    if quoted:
        options = list(param.options)
    hits: list[tuple[int, int, Any]] = []
    for option in options:
        if isinstance(option, bool) or not isinstance(option, str | int | float):
            continue
        text = str(option)
        if not text.strip():
            continue
        forms = {text, text.replace("_", " "), text.replace("-", " ")}
        for form in forms:
            for m in re.finditer(rf"(?<!\w){re.escape(form)}(?!\w)", task, re.IGNORECASE):
                hits.append((m.start(), m.end(), option))
        if not hits and isinstance(option, str) and len(option) > 4 and " " not in option:
            for m in re.finditer(r"\b\w+\b", task):
                if len(m.group(0)) > 4 and stem(m.group(0)) == stem(option):
                    hits.append((m.start(), m.end(), option))
    hits = [h for h in hits if free(Span(h[0], h[1], "choice", h[2], ""))]
    if hits:
        start, end, option = min(  # earliest, longest, then the one written in its case
            hits, key=lambda h: (h[0], -(h[1] - h[0]), task[h[0] : h[1]] != str(h[2]))
        )
        where = "enum value" if not quoted else "option the description lists"
        return (
            option,
            Span(start, end, "choice", option, task[start:end]),
            f"{where} {task[start:end]!r}",
        )
    if options and all(isinstance(o, str) and 0 < len(o) <= 3 for o in options):
        for m in re.finditer(r"(?<!\w)([A-Z][a-z]{3,})", task):
            if m.start() == 0 or not free(Span(m.start(), m.end(), "choice", None, "")):
                continue
            for option in options:
                if m.group(1).lower().startswith(option.lower()):
                    span = Span(m.start(), m.end(), "choice", option, m.group(1))
                    return option, span, f"{m.group(1)!r} abbreviates the enum value {option!r}"
    return None


CHOICE_LISTS = "choice_lists"
_JOIN = re.compile(r"['\"]?\s*(?:,\s*and|,\s*or|,|and|or|&)\s*['\"]?", re.IGNORECASE)


def listed_choices(task: str, param: Param, first: Span) -> list[tuple[Any, Span]]:
    """The enum values written as a list with the first one ("'Civil' and 'Criminal'
    cases", "rock and jazz concerts"), each a call of its own; [] when it stands alone."""
    if CHOICE_LISTS in ABLATED or param.kind == "array":
        return []
    out = [(first.value, first)]
    while True:
        end = out[-1][1].end
        join = _JOIN.match(task, end)
        if join is None or join.end() == end:
            break
        rest = task[join.end() :]
        nxt = None
        for option in param.enum or param.options or ():
            text = str(option)
            m = re.match(rf"{re.escape(text)}(?!\w)", rest, re.IGNORECASE) if text.strip() else None
            if m and option not in [o for o, _ in out]:
                start = join.end()
                nxt = (option, Span(start, start + m.end(), "choice", option, m.group(0)))
                break
        if nxt is None:
            break
        out.append(nxt)
    return out if len(out) > 1 else []
