"""From a task and the offered tools to the calls to make, or an honest decline.

1. Fit: a tool fits when the task shares words with its name or description (stems
   compared, stop words ignored); when the best-ranked tool shares none, nothing is called.
2. Several tools: the task is cut at sentence ends and at "and"/"also"/"then"; a part
   whose best-fitting tool differs from its neighbour's is a call of its own (“invest
   $2000 in Google and withdraw $1000 from Apple”), otherwise the parts stay one.
3. Several calls of one tool: a scalar parameter whose value is one of a list
   ("circles with radius 3, 5 and 7") becomes one call per item; lists of the same
   length for several parameters are zipped ("Japan and India … 10 and 20 years"); enum
   values written as a list and groups of numbers ("(45, 60) and (81, 27)") are one call
   each; a leading call that lacks what the next has is an introduction, dropped.
4. Missing required arguments: nothing is called; the plan names the tool it would use
   and what is missing. Arguments the caller supplies fill or override extracted ones.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from .assign import Extraction, _convert, extract_arguments
from .segments import fit_score, repeated_calls, sections, split_parts
from .switches import ABLATED
from .text import content_stems, params_of
from .values import Span, find_spans


@dataclass(frozen=True)
class Offered:
    """A tool as the planner sees it (best-ranked first in the list given to it)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class PlannedCall:
    tool: str
    arguments: dict[str, Any]
    why: dict[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    """The calls to make; or ``declined`` with the tool it would use and what is missing."""

    calls: list[PlannedCall] = field(default_factory=list)
    declined: str = ""  # why nothing is called ("" when calls are made)
    tool: str | None = None
    missing: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)  # found so far, when declined
    why: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": [{"tool": c.tool, "arguments": c.arguments, "why": c.why} for c in self.calls],
            "declined": self.declined or None,
            "tool": self.tool,
            "missing": self.missing,
            "arguments": self.arguments,
            "why": self.why,
        }


@dataclass
class Options:
    """Switches for the ablation in bench/bfcl.py; every one is on in normal use."""

    fit_gate: bool = True
    several_tools: bool = True
    several_calls: bool = True


def fit(task_stems: set[str], tool: Offered) -> float:
    """Shared words between task and tool: a name word counts 2, a description word 1,
    a word of the parameters (names, descriptions, enum values) a half."""
    score = fit_score(task_stems, tool.name, tool.description)
    if PARAMETER_WORDS:
        seen = content_stems(f"{tool.name} {tool.description}")
        score += 0.5 * len(task_stems & (_parameter_stems(tool.parameters) - seen))
    return score


PARAMETER_WORDS = True
NAMED = 2.0
"""The fit of a tool one of whose name's words the task writes; below it, the tool is
called only when an argument has evidence in the task beyond sentence order."""
WEAK_FIT_GATE = "weak_fit"


def _parameter_stems(parameters: dict[str, Any]) -> set[str]:
    stems: set[str] = set()
    for param in params_of(parameters):
        stems |= param.cue_stems
        for option in param.enum or ():
            if isinstance(option, str):
                stems |= content_stems(option)
    return stems


def plan_calls(
    task: str,
    tools: list[Offered],
    *,
    supplied: dict[str, Any] | None = None,
    options: Options | None = None,
) -> Plan:
    """What the router should do with ``task`` given ``tools`` (best-ranked first)."""
    opts = options or Options()
    if not tools:
        return Plan(declined="no enabled tool matches the task")
    task_stems = content_stems(task)
    scores = [fit(task_stems, tool) for tool in tools]
    best = max(range(len(tools)), key=lambda i: (scores[i], -i))
    if opts.fit_gate and scores[best] < 1:
        return Plan(
            declined=f"no offered tool fits the task (closest: {tools[0].name}, which shares no "
            "words with it)",
            tool=tools[0].name,
        )
    chosen = tools[best] if opts.fit_gate else tools[0]
    if opts.fit_gate and scores[best] < NAMED and not supplied and _guessed(task, chosen):
        return Plan(
            declined=f"{chosen.name} fits the task only weakly (no word of its name in it) and "
            "no argument is named in it: the tool would be a guess, and so would its arguments",
            tool=chosen.name,
        )
    if (opts.several_tools or opts.several_calls) and not supplied:
        several = _sectioned(task, tools, chosen, opts)
        if several:
            return Plan(calls=several)
    calls, missing = _calls_for(task, chosen, supplied, opts)
    if missing:
        first = calls[0] if calls else PlannedCall(chosen.name, {})
        return Plan(
            declined=f"would use {chosen.name}, but the task does not give "
            + ", ".join(repr(m) for m in missing),
            tool=chosen.name,
            missing=missing,
            arguments=first.arguments,
            why=first.why,
        )
    return Plan(calls=calls)


def _guessed(task: str, tool: Offered) -> bool:
    """Whether no argument of ``tool`` has evidence beyond the order of the sentence (a
    name, unit, relation, enum value, the phrase after a cue word or quotes tie none of
    them to the task)."""
    if WEAK_FIT_GATE not in ABLATED:
        found = extract_arguments(task, tool.parameters, topic=f"{tool.name} {tool.description}")
        cued = any(  # the phrase after a cue word, text the user quoted
            (span.kind == "phrase" and span.unit) or span.kind == "quoted"
            for span in found.spans.values()
        )
        return not (found.strong or cued)
    return False


def _calls_for(
    task: str, tool: Offered, supplied: dict[str, Any] | None, opts: Options
) -> tuple[list[PlannedCall], list[str]]:
    """The calls of ``tool`` the task asks for, and the required parameters missing."""
    spans = find_spans(task)
    found = extract_arguments(
        task, tool.parameters, topic=f"{tool.name} {tool.description}", spans=spans
    )
    arguments, why = dict(found.arguments), dict(found.notes)
    for key, value in (supplied or {}).items():
        arguments[key], why[key] = value, "supplied by the caller"
    missing = [m for m in found.missing if m not in arguments]
    if missing:
        return [PlannedCall(tool.name, arguments, why)], missing
    if opts.several_calls and not supplied:
        tuples = _tuples(task, tool, found)
        if tuples:
            return tuples, []
        expanded = _expand(found, spans, tool) or [PlannedCall(tool.name, arguments, why)]
        expanded = _alternatives(found, expanded)
        if len(expanded) > 1:
            return expanded, []
    return [PlannedCall(tool.name, arguments, why)], []


TUPLES = "tuples"
_NUM = r"-?\d+(?:\.\d+)?"
_TUPLE = re.compile(rf"\(\s*{_NUM}(?:\s*,\s*{_NUM})+\s*\)|\b{_NUM}\s+and\s+{_NUM}\b")


def _tuples(task: str, tool: Offered, found: Extraction) -> list[PlannedCall]:
    """One call per group of numbers when the task writes two or more groups as long as
    the tool has required numeric parameters ("the pairs (45, 60) and (81, 27)", "sides 3
    and 4, 5 and 12"); each group fills those parameters in order."""
    if TUPLES in ABLATED:
        return []
    numeric = [p for p in params_of(tool.parameters)
               if p.required and p.kind in {"integer", "number"}]  # fmt: skip
    matches = list(_TUPLE.finditer(task))
    joined = all(  # the groups follow each other: "3 and 4, 5 and 12", not "… of 3 and 5 between"
        re.fullmatch(r"\s*(?:,|;|and|,\s*and)\s*", task[a.end() : b.start()])
        for a, b in itertools.pairwise(matches)
    )
    groups = [re.findall(_NUM, m.group(0)) for m in matches] if joined else []
    if len(groups) < 2 or len(numeric) < 2 or any(len(g) != len(numeric) for g in groups):
        return []
    calls = []
    for index, group in enumerate(groups):
        arguments, why = dict(found.arguments), dict(found.notes)
        for param, text in zip(numeric, group, strict=True):
            if "." in text and param.kind == "integer":
                return []
            arguments[param.name] = float(text) if "." in text else int(text)
            why[param.name] = f"number {text} of group {index + 1} ({', '.join(group)})"
        calls.append(PlannedCall(tool.name, arguments, why))
    return calls


def _alternatives(found: Extraction, calls: list[PlannedCall]) -> list[PlannedCall]:
    """Each call once per enum value of a list the task writes ("rock and jazz")."""
    for name, options in found.alternatives.items():
        calls = [
            PlannedCall(
                call.tool,
                {**call.arguments, name: option},
                {
                    **call.why,
                    name: f"value {index + 1} of the listed {', '.join(map(str, options))}",
                },
            )
            for call in calls
            for index, option in enumerate(options)
        ]
    return calls


def _expand(found: Extraction, spans: list[Span], tool: Offered) -> list[PlannedCall]:
    """One call per item when scalar arguments came from lists of like values."""
    properties = tool.parameters.get("properties") or {}
    listed: dict[str, list[Span]] = {}
    groups = [span.group for span in found.spans.values() if span.group >= 0]
    for name, span in found.spans.items():
        if groups.count(span.group) > 1:
            continue  # the list's items went to several parameters ("gcd of 36 and 48")
        prop = properties.get(name) or {}
        if span.group < 0 or prop.get("type") == "array":
            continue
        listed[name] = [s for s in spans if s.group == span.group]
    if not listed:
        return []
    sizes = {len(items) for items in listed.values()}
    size = max(sizes)

    by_name = {p.name: p for p in params_of(tool.parameters)}
    calls: list[PlannedCall] = []
    for index in range(size):
        arguments = dict(found.arguments)
        why = dict(found.notes)
        for name, items in listed.items():
            if len(items) != size:
                continue
            value = _convert(by_name[name], items[index])
            if value is None:
                return []
            arguments[name] = value
            why[name] = f"item {index + 1} of the list {', '.join(s.text for s in items)}"
        calls.append(PlannedCall(tool.name, arguments, why))
    return calls


def _span_of(task: str, texts: list[str]) -> str:
    """The task's own text from the first of ``texts`` to the end of the last (the words
    cut between them, "and", "then", stay: "London and Tokyo" is no "London Tokyo")."""
    start = task.find(texts[0])
    end = task.find(texts[-1], max(start, 0))
    if start < 0 or end < 0:
        return " ".join(texts)
    return task[start : end + len(texts[-1])]


INTROS = "intros"


def _without_intro(
    calls: list[tuple[dict[str, Any], dict[str, str]]], tool: Offered
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The calls without the leading ones that lack a required value the next one has:
    an introduction ("the return on equity for two companies? The first has …") is
    no call of its own."""
    required = [p.name for p in params_of(tool.parameters) if p.required]
    while (
        INTROS not in ABLATED
        and len(calls) > 2
        and any(r not in calls[0][0] for r in required)
        and all(r in calls[1][0] for r in required)
    ):
        calls = calls[1:]
    return calls


def _sectioned(
    task: str, tools: list[Offered], chosen: Offered, opts: Options
) -> list[PlannedCall]:
    """Several calls when parts of the task fit different tools or repeat a parameter
    with new values; [] when the task asks for one call (or a call lacks arguments)."""
    parts = split_parts(task)
    if len(parts) < 2:
        return []
    calls: list[PlannedCall] = []
    for tool, texts in sections(parts, tools, chosen, opts.several_tools):
        text = _span_of(task, texts)
        repeated = repeated_calls(texts, tool, text) if opts.several_calls else []
        if repeated:
            for arguments, why in _without_intro(repeated, tool):
                found = extract_arguments(text, tool.parameters)
                if any(m not in arguments for m in found.missing):
                    return []
                calls.append(PlannedCall(tool.name, arguments, why))
            continue
        section_calls, missing = _calls_for(text, tool, None, opts)
        if missing:  # what the part leaves out ("… and what his discovery was"): the task's
            whole, _ = _calls_for(task, tool, None, Options(several_calls=False))
            for call in section_calls:
                for name in missing:
                    if name not in whole[0].arguments:
                        return []
                    call.arguments[name] = whole[0].arguments[name]
                    call.why[name] = f"from the whole task: {whole[0].why.get(name, '')}"
        calls.extend(section_calls)
    return calls if len(calls) > 1 else []
