"""``check_risk_keywords``: risk findings in a note, each with its span and its ConText
status (affirmed, negated, historical, hypothetical, possible, or about someone else)."""

from __future__ import annotations

import re
from typing import Any

from ...decorators import tool
from ...errors import UsageError
from .context_rules import annotate

#: Risk categories and the phrases that name them. Two- and four-letter abbreviations
#: (SI, HI, SH, NSSI, IPV) match in capitals only, so "si" in other words never does.
CATEGORY_PATTERNS: dict[str, list[str]] = {
    "suicidal_ideation": [
        r"suicidal (?:ideation|thoughts?|intent|plan|behaviou?r)",
        r"suicide (?:attempts?|plan|risk)",
        r"thoughts? of (?:suicide|killing (?:him|her|my|them)sel(?:f|ves)|death|not waking up)",
        r"suicidal",
        r"suicide",
        r"(?:wants?|wanted|wish(?:es|ed)?) to (?:die|be dead)",
        r"better off dead",
        r"passive death wish",
        r"death wish",
        r"kill(?:ing)? (?:him|her|my|them)sel(?:f|ves)",
        r"end (?:his|her|my|their) life",
        r"overdos(?:e|ed|ing)",
        r"(?-i:\b(?:passive |active )?SI\b)",
    ],
    "self_harm": [
        r"self[- ]?harm(?:ing)?",
        r"self[- ]injur(?:y|ious behaviou?r)",
        r"non-suicidal self-injury",
        r"cutting",
        r"cut (?:him|her|my|them)sel(?:f|ves)",
        r"burning (?:him|her|my|them)sel(?:f|ves)",
        r"burning",
        r"hitting (?:his|her|my|their) head",
        r"(?-i:\bNSSI\b)",
        r"(?-i:\bSH\b)",
    ],
    "harm_to_others": [
        r"homicidal(?: ideation| thoughts?| threats?| statements?)?",
        r"thoughts? of (?:hurting|harming) (?:others|someone|\w+)",
        r"urges? to (?:harm|hurt) (?:others|someone)",
        r"harm(?:ing)? others",
        r"violen(?:t|ce)",
        r"aggressi(?:on|ve)",
        r"threatened",
        r"assault(?: charges)?",
        r"(?-i:\bHI\b)",
    ],
    "substance_use": [
        r"substance use(?: disorders?)?",
        r"(?:alcohol|drug|cannabis|opioid|cocaine|heroin|methamphetamine)"
        r" (?:use|misuse|dependence|addiction)",
        r"alcohol",
        r"(?:binge )?drinking",
        r"drugs?",
        r"cannabis",
        r"marijuana",
        r"opioids?",
        r"cocaine",
        r"heroin",
        r"methamphetamine",
        r"intoxicated",
        r"relaps(?:e|ed|es)",
        r"(?-i:\bEtOH\b)",
    ],
    "abuse": [
        r"(?:physical|sexual|emotional|verbal|child) abuse",
        r"domestic violence",
        r"abus(?:e|ed|ive relationship)",
        r"neglect",
        r"assaulted",
        r"(?-i:\bIPV\b)",
    ],
}

_COMPILED = {
    category: re.compile(r"\b(?:" + "|".join(patterns) + r")\b", re.IGNORECASE)
    for category, patterns in CATEGORY_PATTERNS.items()
}
#: A category's findings that a later category's wider phrase covers are dropped
#: ("domestic violence" is abuse, not harm to others; "alcohol abuse" is substance use).
_ORDER = ["substance_use", "abuse", "suicidal_ideation", "self_harm", "harm_to_others"]


def find_targets(text: str) -> list[tuple[int, int, str]]:
    """Risk phrases in ``text``: (start, end, category), longest phrase first on overlap."""
    found = [
        (match.start(), match.end(), category)
        for category in _ORDER
        for match in _COMPILED[category].finditer(text)
    ]
    found.sort(key=lambda item: (-(item[1] - item[0]), _ORDER.index(item[2])))
    kept: list[tuple[int, int, str]] = []
    for start, end, category in found:
        if all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, category))
    return sorted(kept)


def find_terms(text: str, terms: list[str]) -> list[tuple[int, int, str]]:
    """Every case-insensitive, word-bounded occurrence of each term."""
    found = []
    for term in terms:
        pattern = re.compile(r"(?<!\w)" + re.escape(term.strip()) + r"(?!\w)", re.IGNORECASE)
        found += [(m.start(), m.end(), term) for m in pattern.finditer(text)]
    return sorted(found)


def assess(text: str, terms: list[str] | None = None) -> dict[str, Any]:
    """The findings of ``check_risk_keywords`` (also used by the agents' safety guard)."""
    if not isinstance(text, str):
        raise UsageError("text must be a string")
    if terms is not None:
        cleaned = [term for term in terms if isinstance(term, str) and term.strip()]
        if not cleaned:
            raise UsageError("terms must be a non-empty list of phrases")
        spans = find_terms(text, cleaned)
    else:
        spans = find_targets(text)
    findings = annotate(text, [(start, end) for start, end, _ in spans])
    rows = [
        {
            ("term" if terms is not None else "category"): label,
            "text": finding.text,
            "span": [finding.start, finding.end],
            "status": finding.status,
            "triggers": finding.triggers,
        }
        for (_, _, label), finding in zip(spans, findings, strict=True)
    ]
    out: dict[str, Any] = {"findings": rows}
    if terms is not None:
        seen = {row["term"] for row in rows}
        out["not_found"] = [term for term in cleaned if term not in seen]
    affirmed = [row for row in rows if row["status"] in ("affirmed", "possible")]
    out["requires_review"] = bool(affirmed)
    out["summary"] = (
        "; ".join(
            f"{row.get('category', row.get('term'))}: {row['text']!r} {row['status']}"
            for row in affirmed
        )
        or "no affirmed or possible risk finding"
    )
    return out


@tool(category="clinical")
def check_risk_keywords(text: str, terms: list[str] | None = None) -> dict[str, Any]:
    """Find risk statements in a therapy note and say whether each is affirmed, negated,
    historical, hypothetical, possible or about someone else (ConText/NegEx).

    Without ``terms`` it looks for suicidal ideation, self-harm, harm to others, substance
    use and abuse. With ``terms`` it reports the status of each given phrase instead, so
    any finding can be checked ("panic attacks", "insomnia"). Statuses: "denies SI/HI" is
    negated; "history of SH, none since 2019" historical; "if SI returns, call 988"
    hypothetical; "r/o", "possible" possible; "mother has depression" other.
    ``requires_review`` is true when any finding is affirmed or possible.

    Args:
        text: The note or sentence to check.
        terms: Phrases to check instead of the built-in risk categories.
    """
    return assess(text, terms)
