"""SessionSight's deterministic tools against the pack's labelled sets.

- ``check_risk_keywords``: per-status precision and recall on data/risk_sentences.jsonl
  (sentences labelled by clinical meaning), two ways: *categories* (the tool finds the
  risk phrase itself; a labelled phrase it does not find counts as a miss) and *terms*
  (the labelled phrase is given as ``terms``: the status alone).
- ``lookup_diagnosis_code``: top-1 accuracy on data/diagnosis_phrases.jsonl (a phrase is
  right when the first code is one of its accepted codes).

    python bench/sessionsight.py [--errors] [--published-only]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path

from tooldb.packs.sessionsight import context_rules
from tooldb.packs.sessionsight.codes import lookup
from tooldb.packs.sessionsight.risk import assess

DATA = Path(__file__).parents[1] / "src" / "tooldb" / "packs" / "sessionsight" / "data"
STATUSES = ["affirmed", "negated", "historical", "hypothetical", "possible", "other"]


def load(name: str) -> list[dict[str, object]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def predict(item: dict[str, object], mode: str) -> str:
    text, term = str(item["text"]), str(item["term"])
    match = re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", text, re.IGNORECASE)
    assert match, (term, text)
    start, end = match.span()
    found = assess(text, [term] if mode == "terms" else None)["findings"]
    overlapping = [f for f in found if f["span"][0] < end and start < f["span"][1]]
    return str(overlapping[0]["status"]) if overlapping else "missed"


def status_table(items: list[dict[str, object]], mode: str, errors: bool) -> None:
    gold = [str(item["status"]) for item in items]
    started = time.perf_counter()
    pred = [predict(item, mode) for item in items]
    ms = (time.perf_counter() - started) * 1000 / len(items)
    pairs = Counter(zip(gold, pred, strict=True))
    print(f"\ncheck_risk_keywords, {mode} mode: {len(items)} sentences, {ms:.2f} ms each")
    print("| status | gold | precision | recall | F1 |\n|---|---:|---:|---:|---:|")
    for status in STATUSES:
        tp = pairs[(status, status)]
        predicted = sum(n for (_, p), n in pairs.items() if p == status)
        actual = gold.count(status)
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        print(f"| {status} | {actual} | {precision:.3f} | {recall:.3f} | {f1:.3f} |")
    accuracy = sum(g == p for g, p in zip(gold, pred, strict=True)) / len(items)
    print(f"| **accuracy** | {len(items)} | | {accuracy:.3f} | |  (missed: {pred.count('missed')})")
    if errors:
        for item, p in zip(items, pred, strict=True):
            if p != item["status"]:
                print(f"  {item['status']:>12} -> {p:<12} [{item['term']}] {item['text']}")


def codes_table(items: list[dict[str, object]], errors: bool) -> None:
    right = 0
    started = time.perf_counter()
    for item in items:
        result = lookup(str(item["phrase"]))
        code = result["code"]
        accepted = list(item["codes"])  # type: ignore[call-overload]
        if code in accepted:
            right += 1
        elif errors:
            print(f"  {item['phrase']!r}: got {code} ({result.get('title')}), want {accepted}")
    ms = (time.perf_counter() - started) * 1000 / len(items)
    print(f"\nlookup_diagnosis_code: top-1 {right}/{len(items)} = {right / len(items):.3f}")
    print(f"({ms:.2f} ms a phrase)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list every wrong item")
    parser.add_argument(
        "--published-only",
        action="store_true",
        help="medspaCy's lexicon alone, without the pack's additions (EXTRA_RULES)",
    )
    args = parser.parse_args()
    if args.published_only:
        context_rules.EXTRA_RULES.clear()
        context_rules.rules.cache_clear()
    sentences = load("risk_sentences.jsonl")
    for mode in ("categories", "terms"):
        status_table(sentences, mode, args.errors)
    codes_table(load("diagnosis_phrases.jsonl"), args.errors)


if __name__ == "__main__":
    main()
