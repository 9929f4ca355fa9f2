"""Learning from use: does selection rank unseen tasks better after replaying past ones?

For each data set in ../shared/data with enough queries, the queries are split by query
(fixed seed) into train (80%) and test (20%; at most --max-test of them, sampled with the
same seed). The catalogue is registered in a fresh SQLite registry; then 0%, 10%, 50% and
100% of train are replayed as successful runs through the public API
(``registry.learn(task, tool)``, what ``call(..., task=)``, a run or ``feedback`` store:
one per relevant tool of each train query), and the test queries are ranked after each
step: nDCG@10 and R@5 (x100, as bench/selection.py). The 0% row is the cold start: it must
equal the ranking with learning off, which the script checks. Also: replay throughput
(runs/s, task vectors cached so the model is not timed) and select p50 with 100,000
stored tasks (the first data set's evidence topped up with near copies of its tasks).

    .venv/bin/python bench/learning.py                       # every data set with >= 180 queries
    .venv/bin/python bench/learning.py --datasets metatool --max-test 500

Query and tool vectors are cached on disk (--cache, default ~/.cache/tooldb-bench), so a
second run skips the model.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import tooldb  # noqa: E402
from selection import DATA, DATASETS, Scores, read_jsonl, tool_spec  # noqa: E402
from selection_scale import CachedEmbedder  # noqa: E402
from tooldb import Settings  # noqa: E402
from tooldb.embedders import open_embedder  # noqa: E402
from tooldb.errors import DefinitionError  # noqa: E402
from tooldb.selection.evidence import EvidenceIndex  # noqa: E402
from tooldb.selection.select import Filters  # noqa: E402
from tooldb.stores import EvidenceWrite  # noqa: E402

FRACTIONS = (0.0, 0.1, 0.5, 1.0)
#: --sweep: after 100% of train, each variant of the evidence settings (one change at a
#: time) ranks the test queries again; the leave-one-dataset-out table picks, for each
#: set, the variant best on the others and reports it on the one left out.
VARIANTS: dict[str, dict[str, float]] = {
    "defaults": {},
    "weight 8": {"weight": 8.0},
    "weight 32": {"weight": 32.0},
    "min cosine 0.6": {"min_cosine": 0.6},
    "neighbours 8": {"neighbours": 8},
    "closeness^2": {"closeness_power": 2.0},
    "closeness^2, weight 32": {"closeness_power": 2.0, "weight": 32.0},
    "prior mass 4": {"prior_mass": 4.0},
    "prior mass 4, weight 32": {"prior_mass": 4.0, "weight": 32.0},
}
#: What --sweep chooses a variant by on the other sets: the mean nDCG@10 after 10%, 50%
#: and 100% of train (every amount of evidence, not only the most).
SWEPT_FRACTIONS = (0.1, 0.5, 1.0)
MIN_QUERIES = 180
TEST_SHARE = 0.2
STORED_TASKS = 100_000
#: The near copies that top the evidence up to STORED_TASKS: a train task's vector plus
#: this much Gaussian noise per component (cosine ~0.93 to it, like a paraphrase; written
#: straight to the store, so none merges). 0.05 made vectors half noise (cosine ~0.7 to
#: the task, ~0.5 to each other), unlike any real task, and an HNSW graph over
#: near-random points is the slowest kind to walk (bench/README.md).
NOISE = 0.02


def split(queries: list[dict[str, Any]], max_test: int, seed: int) -> tuple[list[Any], list[Any]]:
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    cut = int(len(order) * TEST_SHARE)
    test = [queries[i] for i in order[:cut]]
    train = [queries[i] for i in order[cut:]]
    if max_test and len(test) > max_test:
        test = random.Random(seed).sample(test, max_test)
    return train, test


def evaluate(registry: Any, test: list[Any], vectors: np.ndarray) -> dict[str, float]:
    scores = Scores.empty()
    selector = registry.selector
    for query, vector in zip(test, vectors, strict=True):
        names = selector.select(query["query"], 10, Filters(), query_vector=vector).names
        scores.add(names, set(map(str, query["relevant"])))
    means = scores.mean()
    return {"nDCG@10": means["nDCG@10"], "R@5": means["R@5"]}


def rankings(registry: Any, test: list[Any], vectors: np.ndarray) -> list[list[str]]:
    selector = registry.selector
    return [
        selector.select(q["query"], 10, Filters(), query_vector=v).names
        for q, v in zip(test, vectors, strict=True)
    ]


def run_dataset(
    name: str, args: argparse.Namespace, embedder: CachedEmbedder, workdir: Path
) -> dict[str, Any]:
    folder = DATA / name
    queries = [q for q in read_jsonl(folder / "queries.jsonl") if q.get("relevant")]
    train, test = split(queries, args.max_test, args.seed)
    specs = []
    for entry in read_jsonl(folder / "tools.jsonl"):
        with contextlib.suppress(DefinitionError):
            specs.append(tool_spec(entry))
    url = f"sqlite:///{workdir / f'{name}.db'}"
    settings = replace(
        Settings(), url=url, embedder=embedder.id, record_decisions=False, record_calls=False
    )
    registry = tooldb.open(url, settings=settings)
    registry._embedder, registry._embedder_loaded = embedder, True  # cached vectors (bench only)
    try:
        registry.register(specs)
        test_vectors = embedder.embed([q["query"] for q in test])
        embedder.embed([q["query"] for q in train])  # cached: replay times the store, not the model
        embedder.save()
        names = {spec.name for spec in specs}
        cold = rankings(registry, test, test_vectors)
        registry.selector.evidence = None  # learning off: must rank exactly as the cold start
        unchanged = cold == rankings(registry, test, test_vectors)
        registry._attach_evidence(registry.selector)
        rows, done, replay_s, runs = [], 0, 0.0, 0
        swept: dict[str, dict[float, float]] = {label: {} for label in VARIANTS}
        for fraction in FRACTIONS:
            upto = round(fraction * len(train))
            started = time.perf_counter()
            for query in train[done:upto]:
                for tool in map(str, query["relevant"]):
                    if tool in names:
                        registry.learn(query["query"], tool, good=True)
                        runs += 1
            replay_s += time.perf_counter() - started
            done = upto
            rows.append(
                {"fraction": fraction, "replayed": upto, **evaluate(registry, test, test_vectors)}
            )
            print(f"  {name} {fraction:>4.0%}: {rows[-1]}", flush=True)
            if args.sweep and fraction in SWEPT_FRACTIONS:
                defaults = registry.selector.evidence_weights
                for label, changes in VARIANTS.items():
                    registry.selector.evidence_weights = replace(defaults, **changes)
                    swept[label][fraction] = evaluate(registry, test, test_vectors)["nDCG@10"]
                registry.selector.evidence_weights = defaults
                at = {label: round(values[fraction], 1) for label, values in swept.items()}
                print(f"  {name} sweep {fraction:.0%}: {at}", flush=True)
        stored = registry.store.count_evidence(registry.tenant)
        searched = exact_versus_graph(registry, test, test_vectors)
        print(f"  {name} exact vs graph: {searched}", flush=True)
        report = {
            "dataset": name, "tools": len(specs), "train": len(train), "test": len(test),
            "rows": rows, "cold_unchanged": unchanged, "runs": runs,
            "runs_per_s": runs / replay_s if replay_s else 0.0, "stored": stored,
            "swept": swept if args.sweep else {}, "searched": searched,
        }  # fmt: skip
        if args.p50 and not args.p50_done:
            report["p50"] = select_p50(registry, train, test, test_vectors, embedder)
            args.p50_done = True
        return report
    finally:
        registry.close()


def exact_versus_graph(registry: Any, test: list[Any], vectors: np.ndarray) -> dict[str, Any]:
    """The test rankings with the evidence searched as configured (through the graph past
    ``select_evidence_ann_min`` stored tasks) and exactly: nDCG@10 of each, and the share
    of queries whose top 10 is identical."""
    selector = registry.selector
    current = selector.evidence
    graph_names = rankings(registry, test, vectors)
    graph_score = evaluate(registry, test, vectors)["nDCG@10"]
    exact = EvidenceIndex(registry.store, registry.tenant, current.embedder_id, current.dim)
    exact.refresh(force=True)
    selector.evidence = exact
    try:
        exact_names = rankings(registry, test, vectors)
        exact_score = evaluate(registry, test, vectors)["nDCG@10"]
    finally:
        selector.evidence = current
    same = sum(a == b for a, b in zip(graph_names, exact_names, strict=True)) / len(test)
    return {
        "graph": current.approximate, "stored": current.alive, "nDCG exact": exact_score,
        "nDCG as searched": graph_score, "identical top 10": same,
    }  # fmt: skip


def select_p50(
    registry: Any, train: list[Any], test: list[Any], test_vectors: np.ndarray, embedder: Any
) -> dict[str, float]:
    """``registry.select(task, k=5)`` p50 (task vector cached) with the evidence topped up
    to 100,000 stored tasks: near copies of the train tasks (their vectors plus ``NOISE``),
    written to the store in batches, then caught up (the new rows appended to
    the graph); and the same 100,000 searched exactly, for comparison."""
    tasks = [q["query"] for q in test[:300]]

    def timed() -> float:
        samples = []
        for task in tasks * 2:
            started = time.perf_counter()
            registry.select(task, k=5, record=False)
            samples.append((time.perf_counter() - started) * 1000)
        return float(np.percentile(samples, 50))

    with_evidence = timed()
    evidence = registry.selector.evidence
    registry.selector.evidence = None
    without = timed()
    registry.selector.evidence = evidence
    stored = registry.store.count_evidence(registry.tenant)
    rng = np.random.default_rng(0)
    vectors = embedder.embed([q["query"] for q in train])
    now = time.time()
    while stored < STORED_TASKS:
        batch = []
        for _ in range(min(5_000, STORED_TASKS - stored)):
            i = int(rng.integers(len(train)))
            vector = vectors[i] + rng.normal(0, NOISE, vectors.shape[1]).astype(np.float32)
            vector /= np.linalg.norm(vector)
            batch.append({
                "tool": str(train[i]["relevant"][0]), "task": train[i]["query"],
                "embedder": embedder.id, "vector": vector.astype(np.float32).tobytes(),
                "good": 1.0, "bad": 0.0, "created_at": now, "last_seen": now,
            })  # fmt: skip
        registry.store.write_evidence(registry.tenant, EvidenceWrite(inserts=batch))
        stored += len(batch)
    started = time.perf_counter()
    evidence.refresh(force=True)
    caught_up = time.perf_counter() - started
    full = timed()
    exact = EvidenceIndex(registry.store, registry.tenant, evidence.embedder_id, evidence.dim)
    exact.refresh(force=True)
    registry.selector.evidence = exact
    full_exact = timed()
    registry.selector.evidence = evidence
    return {
        "no evidence": without, "evidence as replayed": with_evidence,
        "100,000 tasks (graph)": full, "100,000 tasks (exact)": full_exact,
        "catch-up to 100,000 s": caught_up,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--max-test", type=int, default=1000, help="0 = every test query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--cache", default="~/.cache/tooldb-bench")
    parser.add_argument("--no-p50", dest="p50", action="store_false")
    parser.add_argument("--sweep", action="store_true", help="leave-one-dataset-out check")
    args = parser.parse_args()
    args.p50_done = False
    names = args.datasets or [
        name for name in DATASETS
        if sum(1 for _ in (DATA / name / "queries.jsonl").open()) >= MIN_QUERIES
    ]  # fmt: skip
    embedder = CachedEmbedder(open_embedder(args.embedder), Path(args.cache).expanduser())
    settings = Settings()
    print(
        f"# embedder {embedder.id}; evidence weight {settings.select_evidence_weight}, "
        f"min cosine {settings.select_evidence_min_cosine}, neighbours "
        f"{settings.select_evidence_neighbours}; test <= {args.max_test} queries, seed {args.seed}"
    )
    reports = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in names:
            reports.append(run_dataset(name, args, embedder, Path(workdir)))
            embedder.save()
    print_table(reports)


def print_table(reports: list[dict[str, Any]]) -> None:
    header = (
        "| data set | tools | train / test | "
        + " | ".join(f"{f:.0%} nDCG@10 / R@5" for f in FRACTIONS)
        + " | gain | runs/s | cold start unchanged |"
    )
    print("\n" + header)
    print("|" + "---|" * (header.count("|") - 1))
    for r in reports:
        cells = " | ".join(f"{row['nDCG@10']:.1f} / {row['R@5']:.1f}" for row in r["rows"])
        gain = r["rows"][-1]["nDCG@10"] - r["rows"][0]["nDCG@10"]
        print(
            f"| {r['dataset']} | {r['tools']} | {r['train']} / {r['test']} | {cells} | "
            f"{gain:+.1f} | {r['runs_per_s']:.0f} | {'yes' if r['cold_unchanged'] else 'NO'} |"
        )
    print(
        "\n| data set | evidence search | stored tasks | nDCG@10 exact | as searched | "
        "identical top 10 |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for r in reports:
        s = r["searched"]
        print(f"| {r['dataset']} | {'graph' if s['graph'] else 'exact'} | {s['stored']} | "
              f"{s['nDCG exact']:.2f} | {s['nDCG as searched']:.2f} | "
              f"{s['identical top 10']:.1%} |")  # fmt: skip
    swept = [r for r in reports if r.get("swept")]
    if len(swept) > 1:
        print_sweep(swept)
    for r in reports:
        if "p50" in r:
            print(f"\n# select p50 ms (k=5, task vector cached) on {r['dataset']}: " + ", ".join(
                f"{label} {value:.2f}" for label, value in r["p50"].items()))  # fmt: skip


def print_sweep(swept: list[dict[str, Any]]) -> None:
    """Leave-one-dataset-out: per set, the variant best on the others (mean nDCG@10 over
    ``SWEPT_FRACTIONS``), reported on the one left out at each fraction, with its worst
    step against the cold start; then every variant on every set."""

    def score(report: dict[str, Any], variant: str) -> float:
        return float(np.mean([report["swept"][variant][f] for f in SWEPT_FRACTIONS]))

    steps = " | ".join(f"{f:.0%}" for f in SWEPT_FRACTIONS)
    print(f"\n| left out | chosen on the others | cold | {steps} | worst vs cold | "
          f"defaults: {steps} | worst vs cold |")  # fmt: skip
    print("|---|---|" + "---:|" * (2 * len(SWEPT_FRACTIONS) + 3))
    for r in swept:
        others = [o for o in swept if o is not r]
        chosen = max(VARIANTS, key=lambda v: sum(score(o, v) for o in others))
        cold = r["rows"][0]["nDCG@10"]
        cells = []
        for variant in (chosen, "defaults"):
            values = [r["swept"][variant][f] for f in SWEPT_FRACTIONS]
            cells.append(" | ".join(f"{v:.1f}" for v in values) + f" | {min(values) - cold:+.1f}")
        print(f"| {r['dataset']} | {chosen} | {cold:.1f} | {cells[0]} | {cells[1]} |")
    names = [r["dataset"] for r in swept]
    print(f"\n| variant (nDCG@10 at {steps}) | " + " | ".join(names) + " | mean |")
    print("|---|" + "---:|" * (len(names) + 1))
    for variant in VARIANTS:
        cells = ["/".join(f"{r['swept'][variant][f]:.1f}" for f in SWEPT_FRACTIONS) for r in swept]
        mean = np.mean([score(r, variant) for r in swept])
        print(f"| {variant} | " + " | ".join(cells) + f" | {mean:.2f} |")


if __name__ == "__main__":
    main()
