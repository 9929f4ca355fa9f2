"""Tasks that ask for several calls: the parts of a sentence and what each asks.

A task is cut at sentence ends, semicolons and "and then"/"also"/"as well as", at a
plain "and" when at least three words follow (so "36 and 24" stays whole) unless it
joins a list of three or more like values, at a comma before an ordinal ("…, the second
circle …") and at a comma between two questions.
Consecutive parts whose best-fitting tool is the same form a section. Within a
section, a part that gives a parameter a value different from the one the call being
built already has starts a new call ("radius of 5 meters and the other with a radius
of 10 meters", "stage 7 in easy mode and stage 3 in hard mode"); what a call lacks it
takes from the call before it ("then repeat with a change in time of 10 seconds").
"""

from __future__ import annotations

import re
from typing import Any

from .assign import extract_arguments
from .switches import ABLATED
from .text import content_stems, params_of, stem, words
from .values import find_spans

RESTATE = "restated"

_CUT = re.compile(
    r"(?<=[.?!;])\s+|\s*,?\s+(?:and then|and also|as well as|then|also|plus|while|whereas)\s+"
    r"|\s*,\s*and\s+(?=(?:\S+\s+){2,}\S)|\s+and\s+(?=(?:\S+\s+){2,}\S)",
    re.IGNORECASE,
)


WHOLE_LISTS = "whole_lists"


def _cut(task: str) -> list[str]:
    """The task cut at ``_CUT``, except inside a list of three or more like values ("New
    York, Los Angeles, London and Tokyo, if …" keeps its last item; "USD to AUD and USD to
    CAD" is two pairs, cut)."""
    cuts = list(_CUT.finditer(task))
    if WHOLE_LISTS not in ABLATED:
        listed = [s for s in find_spans(task) if s.group >= 0]
        grouped = [s.group for s in listed]
        spans = [s for s in listed if grouped.count(s.group) > 2]
        ends = {s.end: s.group for s in spans}
        starts = {s.start: s.group for s in spans}
        cuts = [
            m for m in cuts
            if not (m.start() in ends and ends[m.start()] == starts.get(m.end(), -2))
            or task[m.start() : m.end()].strip(" ,").lower() != "and"
        ]  # fmt: skip
    out, start = [], 0
    for m in cuts:
        out.append(task[start : m.start()])
        start = m.end()
    return [*out, task[start:]]


ORDINALS = "ordinals"
_ORDINAL_CUT = re.compile(
    r"\s*,\s*(?:and\s+)?(?=(?:(?:for|in|with|to|on|at)\s+)?(?:the|a|my|his|her|their)\s+"
    r"(?:second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|next|other|last|final)\b)",
    re.IGNORECASE,
)
"""A comma before "the second …", "for the third …", "and the other …": each ordinal
introduces the next item of an enumeration written in one sentence ("the first circle
has a radius of 5m, the second circle has a radius of 10m, …")."""


def split_parts(task: str) -> list[str]:
    parts = [p.strip() for p in _cut(task) if p and p.strip(" ,.;")]
    if QUESTIONS not in ABLATED:
        parts = [q.strip() for p in parts for q in _questions(p) if q.strip(" ,.;")]
    if ORDINALS in ABLATED:
        return parts
    return [q.strip() for p in parts for q in _ORDINAL_CUT.split(p) if q.strip(" ,.;")]


QUESTIONS = "questions"
_QUESTION_CUT = re.compile(
    r"\s*,\s*(?:and\s+)?(?=(?:what|how|which|who|where|when)(?:'s)?\s+(?:is|are|was|were|does|do|did|will|would|can|about|many|much)\b)",
    re.IGNORECASE,
)
"""A comma before a new question starts a part of its own when the words before it are
a question too ("what is the capital of Australia, what is the population of Canada,
and what is …"); after a condition or a setting ("if you play 20 times, what is …", "in
a series of 10 shots, what is …") the question is the same part."""
_QUESTION = re.compile(r"\W*(?:\w+,?\s+)?(?:what|how|which|who|where|when)\b", re.I)


def _questions(part: str) -> list[str]:
    out = _QUESTION_CUT.split(part)
    merged = [out[0]]
    for piece in out[1:]:
        if _QUESTION.match(merged[-1]):
            merged.append(piece)
        else:
            merged[-1] = f"{merged[-1]}, {piece}"
    return merged


def fit_score(task_stems: set[str], name: str, description: str) -> float:
    """Shared words between task and tool: a name word counts 2, a description word 1."""
    name_stems = {stem(w) for w in words(name) if len(w) > 2} - {"get", "set"}
    return 2.0 * len(task_stems & name_stems) + len(
        task_stems & (content_stems(description) - name_stems)
    )


def best_fit(text: str, tools: list[Any]) -> Any | None:
    """The one tool that fits ``text`` best, or None when none fits or several tie; words
    every offered tool has ("country_info" in each name) tell them apart from nothing."""
    common = set.intersection(*(content_stems(f"{t.name} {t.description}") for t in tools))
    stems = content_stems(text) - common
    scores = [fit_score(stems, t.name, t.description) for t in tools]
    top = max(scores, default=0.0)
    winners = [t for t, s in zip(tools, scores, strict=True) if s == top]
    return winners[0] if top > 0 and len(winners) == 1 else None


def sections(
    parts: list[str], tools: list[Any], first: Any, several_tools: bool
) -> list[tuple[Any, list[str]]]:
    """Consecutive parts grouped by the tool that fits them (a part that fits none, or
    ties, stays with the tool before it)."""
    out: list[tuple[Any, list[str]]] = []
    for part in parts:
        tool = best_fit(part, tools) if several_tools and len(tools) > 1 else None
        if tool is None:
            tool = out[-1][0] if out else first
        if out and out[-1][0] is tool:
            out[-1][1].append(part)
        else:
            out.append((tool, [part]))
    return out


def repeated_calls(
    parts: list[str], tool: Any, whole: str
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The calls of ``tool`` the parts ask for: one per repetition of a parameter with a
    new value; [] when the parts ask for one call."""
    topic = f"{tool.name} {tool.description}"
    calls: list[tuple[dict[str, Any], dict[str, str]]] = []
    current: dict[str, Any] = {}
    current_why: dict[str, str] = {}
    firm: set[str] = set()  # parameters the call being built has from strong evidence
    required = [p.name for p in params_of(tool.parameters) if p.required]
    for part in parts:
        found = extract_arguments(part, tool.parameters, topic=topic)
        own = {k: v for k, v in found.arguments.items() if k in found.strong}
        restated = (  # the part gives every required value anew ("play 50 times, win 15")
            RESTATE not in ABLATED
            and len(required) > 1
            and all(r in found.spans and r in current for r in required)
            and any(current[r] != found.arguments[r] for r in required)
            and not any(  # a value by order alone does not overrule a named one
                k in firm and k not in own and current[k] != v for k, v in found.arguments.items()
            )
        )
        if restated or any(k in firm and current[k] != v for k, v in own.items()):
            calls.append((current, current_why))
            current, current_why, firm = {}, {}, set()
        firm |= set(own)
        weak = {k: v for k, v in found.arguments.items() if k not in own and k in found.spans}
        for key, value in [*own.items(), *weak.items()]:  # a part's own values, strong first
            if key not in current or (key in own and current_why.get(key, "").endswith("fits")):
                current[key], current_why[key] = value, found.notes[key]
    if current:
        calls.append((current, current_why))
    if len(calls) < 2:
        return []
    overall = extract_arguments(whole, tool.parameters, topic=topic)
    for index, (arguments, why) in enumerate(calls):
        donor = calls[index - 1] if index else (overall.arguments, overall.notes)
        for key, value in donor[0].items():
            guess = not index and key not in overall.strong and key not in required
            if key not in arguments and not guess:  # an optional guess is worse than its default
                arguments[key] = value
                why[key] = (
                    f"as in the {'call before' if index else 'whole task'}: {donor[1].get(key, '')}"
                )
    return calls
