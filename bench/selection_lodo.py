"""Leave-one-dataset-out check of selection's tuned choices (``bench/selection.py --lodo``).

Each tuned choice of the zero-shot ranking (the lexical share, the vectors' check of the
words' best match, the near-twin rule) is varied one at a time, and the two single
retrievers are candidates too. For each data set left out, the variant with the best
mean nDCG@10 on the other sets is chosen, and its nDCG@10 on the one left out is reported
beside the defaults' and the better single retriever's. A choice the left-out sets do not
pick is one that only helps the sets it was tuned on.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import tooldb
from tooldb import Settings
from tooldb.errors import DefinitionError
from tooldb.selection.select import Filters, Selector, Weights

#: Variants of the defaults, each changing one tuned choice (Weights fields).
VARIANTS: dict[str, dict[str, float]] = {
    "defaults": {},
    "BM25 only": {"lexical_share": 1.0},
    "dense only": {"lexical_share": 0.0},
    "share 0.3": {"lexical_share": 0.3},
    "share 0.4": {"lexical_share": 0.4},
    "share 0.6": {"lexical_share": 0.6},
    "share 0.7": {"lexical_share": 0.7},
    "no unrelated check": {"unrelated_share": 1.0},
    "no near-twin rule": {"twin_cosine": 1.0},
}


def scores(name: str, embedder: Any, max_queries: int, workdir: Path) -> dict[str, float]:
    """Mean nDCG@10 of every variant on one data set."""
    from selection import DATA, Scores, read_jsonl, tool_spec

    queries = [q for q in read_jsonl(DATA / name / "queries.jsonl") if q.get("relevant")]
    if max_queries and len(queries) > max_queries:
        step = len(queries) / max_queries
        queries = [queries[int(i * step)] for i in range(max_queries)]
    specs = []
    for entry in read_jsonl(DATA / name / "tools.jsonl"):
        try:
            specs.append(tool_spec(entry))
        except DefinitionError:
            continue
    url = f"sqlite:///{workdir / f'{name}.db'}"
    settings = replace(Settings(), url=url, embedder=embedder.id, record_decisions=False)
    registry = tooldb.open(url, settings=settings)
    registry._embedder, registry._embedder_loaded = embedder, True  # cached vectors (bench only)
    try:
        registry.register(specs)
        vectors = embedder.embed([q["query"] for q in queries])
        embedder.save()
        base = Weights.from_settings(settings)
        found = {}
        for label, changes in VARIANTS.items():
            selector = Selector(registry.selector.index, embedder, replace(base, **changes))
            result = Scores.empty()
            for query, vector in zip(queries, vectors, strict=True):
                names = selector.select(query["query"], 10, Filters(), query_vector=vector).names
                result.add(names, set(map(str, query["relevant"])))
            found[label] = result.mean()["nDCG@10"]
        return found
    finally:
        registry.close()


def run(datasets: list[str], embedder: Any, max_queries: int) -> list[dict[str, Any]]:
    table: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in datasets:
            table[name] = scores(name, embedder, max_queries, Path(workdir))
            print(f"  {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in table[name].items()),
                  flush=True)  # fmt: skip
    rows = []
    for left_out in datasets:
        others = [name for name in datasets if name != left_out]
        chosen = max(VARIANTS, key=lambda v: sum(table[o][v] for o in others) / len(others))
        single = max(table[left_out]["BM25 only"], table[left_out]["dense only"])
        rows.append({
            "left out": left_out, "chosen on the others": chosen,
            "its nDCG@10": table[left_out][chosen], "defaults": table[left_out]["defaults"],
            "better single": single,
        })  # fmt: skip
    print("\n| left out | chosen on the others | its nDCG@10 | defaults | better single | lead |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        lead = row["its nDCG@10"] - row["better single"]
        print(
            f"| {row['left out']} | {row['chosen on the others']} | {row['its nDCG@10']:.1f} | "
            f"{row['defaults']:.1f} | {row['better single']:.1f} | {lead:+.1f} |"
        )
    print("\n| variant | " + " | ".join(datasets) + " | mean |")
    print("|---|" + "---:|" * (len(datasets) + 1))
    for variant in VARIANTS:
        values = [table[name][variant] for name in datasets]
        cells = " | ".join(f"{v:.1f}" for v in values)
        print(f"| {variant} | {cells} | {sum(values) / len(values):.1f} |")
    return rows
