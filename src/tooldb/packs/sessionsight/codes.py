"""``lookup_diagnosis_code``: a diagnosis name or abbreviation to its ICD-10-CM code, from
the code set ``simple-icd-10-cm`` ships (billable codes only).

Matching: expand a clinical abbreviation (``ABBREVIATIONS``), normalise (lower case,
``w/`` to "with", British spellings, light stemming), then rank billable codes by how much
of the phrase's weight (idf over all titles) their title covers, then chapter 5 (F,
mental and behavioural disorders: this is a therapy pack) first, then by how little the
title adds beyond the phrase: an unqualified "major depressive disorder" lands on the
"..., unspecified" code, not on a specific episode. Below ``MIN_COVERAGE`` the answer is
null with the closest candidates, for the model or the clinician to choose.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path
from typing import Any

from ...decorators import tool
from ...errors import UsageError
from ...settings import default_data_dir

#: Clinical abbreviations and the DSM-5-TR names whose ICD-10-CM title differs.
ABBREVIATIONS: dict[str, str] = {
    "gad": "generalized anxiety disorder",
    "mdd": "major depressive disorder",
    "mde": "major depressive disorder single episode",
    "ptsd": "post-traumatic stress disorder",
    "ocd": "obsessive-compulsive disorder mixed obsessional thoughts and acts",
    "ocpd": "obsessive-compulsive personality disorder",
    "adhd": "attention-deficit hyperactivity disorder",
    "add": "attention-deficit hyperactivity disorder predominantly inattentive type",
    "bpd": "borderline personality disorder",
    "asd": "autistic disorder",
    "aud": "alcohol dependence",
    "oud": "opioid dependence",
    "cud": "cannabis dependence",
    "pdd": "dysthymic disorder",
    "odd": "oppositional defiant disorder",
    "dmdd": "disruptive mood dysregulation disorder",
    "pmdd": "premenstrual dysphoric disorder",
    "ied": "intermittent explosive disorder",
    "did": "dissociative identity disorder",
    "bed": "binge eating disorder",
    "an": "anorexia nervosa",
    "bn": "bulimia nervosa",
    "sud": "other psychoactive substance dependence",
    # DSM-5-TR names for ICD-10-CM titles worded otherwise
    "persistent depressive disorder": "dysthymic disorder",
    "social anxiety disorder": "social phobia",
    "autism spectrum disorder": "autistic disorder",
    "illness anxiety disorder": "hypochondriasis",
    "gambling disorder": "pathological gambling",
    "alcohol use disorder": "alcohol dependence",
    "opioid use disorder": "opioid dependence",
    "cannabis use disorder": "cannabis dependence",
    "tobacco use disorder": "nicotine dependence",
    "insomnia disorder": "insomnia unspecified",
}
MIN_COVERAGE = 0.6
#: Words a title may add to a phrase at little cost: they specify nothing clinical.
LIGHT = {"unspecified", "uncomplicated", "single", "episode", "type", "of", "and", "with", "the"}
_PREFIXES = re.compile(r"^(?:r/o|rule out|ruled out|provisional|hx of|history of|dx:?)\s+", re.I)


def _stem(word: str) -> str:
    for suffix in ("ive", "ion", "ic", "ia", "al", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def normalise(text: str) -> list[str]:
    text = text.lower().replace("w/", "with ").replace("generalised", "generalized")
    text = text.replace("posttraumatic", "post-traumatic").replace("'s", "")
    return [_stem(word) for word in re.findall(r"[a-z0-9]+", text.replace("-", " "))]


def _cache_file() -> Path:
    from importlib.metadata import version

    return default_data_dir() / "packs" / f"icd10cm-{version('simple-icd-10-cm')}.json"


@cache
def billable() -> dict[str, str]:
    """Billable code -> its title. Importing ``simple_icd_10_cm`` parses
    its XML (about 10 s here), so the table is kept in a JSON file beside the pack's
    database, written once per library version (at install) and read in well under 1 s."""
    try:
        path = _cache_file()
    except ModuleNotFoundError:  # importlib.metadata's PackageNotFoundError
        raise UsageError(
            "lookup_diagnosis_code needs the ICD-10-CM code set: pip install 'tooldb[clinical]'"
        ) from None
    if path.is_file():
        loaded: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
        return loaded
    import simple_icd_10_cm as icd

    table = {
        code: icd.get_description(code)
        for code in icd.get_all_codes(with_dots=True)
        if icd.is_leaf(code)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(table), encoding="utf-8")
    partial.replace(path)  # atomic: a concurrent reader never sees half a file
    return table


@cache
def _index() -> tuple[dict[str, tuple[str, ...]], dict[str, float], dict[str, list[str]]]:
    """Billable codes' normalised titles, each word's idf, and word -> codes."""
    titles: dict[str, tuple[str, ...]] = {}
    postings: dict[str, list[str]] = defaultdict(list)
    for code, title in billable().items():
        words = normalise(title)
        titles[code] = tuple(words)
        for word in set(words):
            postings[word].append(code)
    total = len(titles)
    idf = {word: math.log(total / len(codes)) + 0.1 for word, codes in postings.items()}
    return titles, idf, dict(postings)


def _rank(words: list[str]) -> list[tuple[float, bool, float, str]]:
    titles, idf, postings = _index()
    query = Counter(w for w in words if w in idf)
    if not query:
        return []
    weight = sum(idf[w] for w in query)
    candidates = {code for w in query for code in postings[w]}
    ranked = []
    for code in candidates:
        title = set(titles[code])
        coverage = sum(idf[w] for w in query if w in title) / weight
        extra = sum(0.1 if w in LIGHT else idf[w] for w in title - set(query))
        ranked.append((coverage, code.startswith("F"), -extra, code))
    ranked.sort(reverse=True)
    return ranked


def lookup(text: str) -> dict[str, Any]:
    """The best billable code for ``text`` (or None) and the closest candidates."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("text must be a non-empty diagnosis name or abbreviation")
    phrase = _PREFIXES.sub("", text.strip()).strip(" .")
    head, _, rest = phrase.partition(",")
    key = head.strip().lower()
    expanded = phrase
    if key in ABBREVIATIONS:
        expanded = f"{ABBREVIATIONS[key]} {rest}"
    else:
        for name, meaning in ABBREVIATIONS.items():
            if len(name) > 4 and name in phrase.lower():
                expanded = phrase.lower().replace(name, meaning)
    words = []
    for word in normalise(expanded):
        words.extend(normalise(ABBREVIATIONS[word]) if word in ABBREVIATIONS else [word])
    ranked = _rank(words)
    table = billable()
    candidates = [
        {"code": code, "title": table[code], "score": round(coverage, 3)}
        for coverage, _, _, code in ranked[:5]
    ]
    best = ranked[0] if ranked else None
    if best is None or best[0] < MIN_COVERAGE:
        return {"query": text, "code": None, "title": None, "candidates": candidates}
    return {
        "query": text,
        "code": best[3],
        "title": table[best[3]],
        "score": round(best[0], 3),
        "candidates": candidates[1:],
    }


@tool(category="clinical", timeout_s=120)
def lookup_diagnosis_code(text: str) -> dict[str, Any]:
    """Map a diagnosis name or abbreviation to its ICD-10-CM code and official title.

    Accepts clinical wording as written in notes: "GAD", "MDD, recurrent, moderate",
    "generalized anxiety", "r/o PTSD", "adjustment disorder w/ anxiety". Returns the
    billable code and title with a match score; when nothing matches well enough,
    ``code`` is null and ``candidates`` lists the closest codes to choose from. Never
    invent a code: use only what this tool returns.

    Args:
        text: The diagnosis name or abbreviation.
    """
    return lookup(text)
