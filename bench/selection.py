"""Selection quality on public tool-retrieval data sets (and, with --scale, speed).

Quality: for each data set in ../shared/data (tools.jsonl, queries.jsonl), register its
tools in a temporary SQLite registry (documents and embeddings made by tooldb's own
registration path), then rank every query three ways through tooldb's Selector:
BM25 only, dense only, and tooldb's full ranking (the settings' blend). Metrics as the
data README defines them (binary relevance, x100): Recall@1/5/10, nDCG@10, MRR (over
the top 100), Comp@5. The published baselines (bm25s / MiniLM, same README) print
beside them.

    .venv/bin/python bench/selection.py                       # every data set
    .venv/bin/python bench/selection.py --datasets toolbench bfcl --max-queries 500
    .venv/bin/python bench/selection.py --embedder hash       # no model: a quick run
    .venv/bin/python bench/selection.py --scale               # speed at 1k/10k/100k tools
    .venv/bin/python bench/selection.py --lodo --max-queries 500  # leave-one-dataset-out

Queries are embedded in batches up front (the same embedder), so the run measures
ranking, not per-query model latency (that is --scale's job).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import tooldb  # noqa: E402
from tooldb import Settings  # noqa: E402
from tooldb.errors import DefinitionError  # noqa: E402
from tooldb.registry.manifests import spec_from_mapping  # noqa: E402
from tooldb.selection.select import Filters, Selector, Weights  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import selection_scale  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
DATASETS = [
    "metatool", "toolbench", "sealtools", "apibench_torchhub", "apibench_tfhub",
    "apibench_huggingface", "bfcl",
]  # fmt: skip
#: Published baselines from shared/data/README.md: R@1, R@5, R@10, nDCG@10, Comp@5.
BASELINES = {
    "metatool": {"BM25": (33.9, 50.8, 57.4, 45.2, 50.2),
                 "MiniLM": (46.5, 70.6, 78.5, 62.2, 70.0)},
    "toolbench": {"BM25": (29.9, 64.4, 74.0, 65.7, 43.4),
                  "MiniLM": (28.6, 59.0, 70.1, 60.8, 38.2)},
    "sealtools": {"BM25": (44.9, 84.0, 91.6, 88.5, 59.9),
                  "MiniLM": (37.8, 60.5, 69.4, 66.0, 29.4)},
    "apibench_torchhub": {"BM25": (14.0, 30.6, 33.9, 23.9, 30.6),
                          "MiniLM": (11.8, 31.7, 43.0, 25.4, 31.7)},
    "apibench_tfhub": {"BM25": (7.6, 29.6, 36.2, 21.5, 29.6),
                       "MiniLM": (15.1, 46.4, 60.0, 37.3, 46.4)},
    "apibench_huggingface": {"BM25": (12.1, 25.1, 32.0, 21.0, 25.1),
                             "MiniLM": (13.3, 32.5, 41.6, 26.0, 32.5)},
    "bfcl": {"BM25": (35.8, 63.8, 74.3, 55.2, 61.7),
             "MiniLM": (33.1, 62.1, 75.7, 53.7, 60.2)},
}  # fmt: skip
METRICS = ("R@1", "R@5", "R@10", "nDCG@10", "MRR", "Comp@5")
DEPTH = 100
PLACEHOLDER_TARGET = "tooldb.examples.basic:add"  # never called: quality needs no execution


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def tool_spec(entry: dict[str, Any]) -> Any:
    """A data-set tool as a tooldb spec, named by its id (ids are unique, names not always)."""
    fields = {
        "name": str(entry["id"]).strip() or "unnamed",
        "description": entry.get("description") or "",
        "category": str(entry.get("category") or "general").strip() or "general",
        "target": PLACEHOLDER_TARGET,
        "parameters": entry.get("parameters"),
    }
    if fields["name"] != str(entry["id"]):
        raise DefinitionError(f"id {entry['id']!r} is not a usable name")
    try:
        return spec_from_mapping(fields)
    except DefinitionError:
        # Some public schemas are not valid JSON Schema; keep the parameters' words.
        fields["description"] += " Parameters: " + _parameter_words(entry.get("parameters"))
        fields["parameters"] = None
        return spec_from_mapping(fields)


def _parameter_words(schema: Any) -> str:
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return "; ".join(
        f"{name}: {prop.get('description', '')}" if isinstance(prop, dict) else str(name)
        for name, prop in properties.items()
    )


@dataclass
class Scores:
    values: dict[str, list[float]]

    @classmethod
    def empty(cls) -> Scores:
        return cls({metric: [] for metric in METRICS})

    def add(self, ranking: list[str], relevant: set[str]) -> None:
        hits = [1.0 if name in relevant else 0.0 for name in ranking]
        for k in (1, 5, 10):
            self.values[f"R@{k}"].append(sum(hits[:k]) / len(relevant))
        dcg = sum(h / math.log2(i + 2) for i, h in enumerate(hits[:10]))
        idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
        self.values["nDCG@10"].append(dcg / idcg)
        first = next((i for i, h in enumerate(hits) if h), None)
        self.values["MRR"].append(0.0 if first is None else 1.0 / (first + 1))
        self.values["Comp@5"].append(1.0 if relevant <= set(ranking[:5]) else 0.0)

    def mean(self) -> dict[str, float]:
        return {m: 100 * float(np.mean(v)) if v else 0.0 for m, v in self.values.items()}


def evaluate(
    name: str, settings: Settings, max_queries: int, workdir: Path, embedder: Any = None
) -> dict[str, Any]:
    folder = DATA / name
    entries = read_jsonl(folder / "tools.jsonl")
    queries = [q for q in read_jsonl(folder / "queries.jsonl") if q.get("relevant")]
    if max_queries and len(queries) > max_queries:
        step = len(queries) / max_queries
        queries = [queries[int(i * step)] for i in range(max_queries)]
    url = f"sqlite:///{workdir / f'{name}.db'}"
    registry = tooldb.open(url, settings=replace(settings, url=url))
    if embedder is not None:  # vectors cached on disk by text (bench only)
        registry._embedder, registry._embedder_loaded = embedder, True
    try:
        started = time.perf_counter()
        specs, skipped = [], 0
        for entry in entries:
            try:
                specs.append(tool_spec(entry))
            except DefinitionError:
                skipped += 1
        registry.register(specs)
        register_s = time.perf_counter() - started
        index = registry.selector.index
        embedder = registry.embedder
        texts = [q["query"] for q in queries]
        vectors = embedder.embed(texts) if embedder is not None else [None] * len(texts)
        weights = Weights.from_settings(settings)
        modes = {
            "BM25 only": replace(weights, lexical_share=1.0),
            "dense only": replace(weights, lexical_share=0.0),
            "tooldb": weights,
        }
        results, per_query = {}, {}
        for mode, mode_weights in modes.items():
            if embedder is None and mode == "dense only":
                continue
            selector = Selector(index, embedder if mode != "BM25 only" else None, mode_weights)
            scores = Scores.empty()
            for query, vector in zip(queries, vectors, strict=True):
                selection = selector.select(query["query"], DEPTH, Filters(), query_vector=vector)
                scores.add(selection.names, set(map(str, query["relevant"])))
            results[mode] = scores.mean()
            per_query[mode] = scores.values
        return {
            "dataset": name, "tools": len(specs), "skipped_tools": skipped,
            "queries": len(queries), "register_s": register_s, "results": results,
            "against": {
                other: paired_differences(per_query["tooldb"], per_query[other])
                for other in ("BM25 only", "dense only") if other in per_query
            },
        }  # fmt: skip
    finally:
        registry.close()


#: Bootstrap resamples of the queries behind each difference's 95% interval.
RESAMPLES = 4_000


def paired_differences(
    ours: dict[str, list[float]], theirs: dict[str, list[float]]
) -> dict[str, tuple[float, float, float]]:
    """Per metric: the full ranking's mean lead over another ranking on the same queries
    (x100) and its 95% interval from a paired bootstrap over the queries (percentile
    method, fixed seed): a lead whose interval excludes 0 is not the luck of which
    queries the data set happens to hold."""
    rng = np.random.default_rng(0)
    out = {}
    for metric in METRICS:
        lead = 100 * (np.asarray(ours[metric]) - np.asarray(theirs[metric]))
        if not len(lead):
            continue
        picks = rng.integers(0, len(lead), size=(RESAMPLES, len(lead)))
        means = lead[picks].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        out[metric] = (float(lead.mean()), float(low), float(high))
    return out


def print_quality(report: dict[str, Any]) -> None:
    name = report["dataset"]
    print(
        f"\n## {name}: {report['tools']} tools ({report['skipped_tools']} skipped), "
        f"{report['queries']} queries, registered+embedded in {report['register_s']:.1f} s"
    )
    print(f"{'retriever':<22}" + "".join(f"{m:>9}" for m in METRICS))
    for label, row in BASELINES.get(name, {}).items():
        r1, r5, r10, ndcg, comp = row
        cells = "".join(f"{v:>9.1f}" for v in (r1, r5, r10, ndcg)) + f"{'-':>9}{comp:>9.1f}"
        print(f"{'published ' + label:<22}{cells}")
    for mode, metrics in report["results"].items():
        print(f"{mode:<22}" + "".join(f"{metrics[m]:>9.1f}" for m in METRICS))
    # the full ranking's lead, * where its 95% interval excludes 0; then the half-width
    for other, differences in report.get("against", {}).items():
        print(f"{'lead over ' + other.split()[0]:<22}" + "".join(
            f"{_lead(*differences[m]):>9}" for m in METRICS))  # fmt: skip
        print(f"{'  +- (95%)':<22}" + "".join(
            f"{(differences[m][2] - differences[m][1]) / 2:>8.1f} " for m in METRICS))  # fmt: skip


def print_summary(reports: list[dict[str, Any]]) -> None:
    """How many data sets the full ranking leads both single retrievers on, by metric,
    and where it is behind either by more than the queries' luck."""
    leads = {metric: 0 for metric in METRICS}
    behind = []
    for report in reports:
        results = report["results"]
        for metric in METRICS:
            others = [values[metric] for mode, values in results.items() if mode != "tooldb"]
            leads[metric] += results["tooldb"][metric] > max(others, default=0.0)
        for other, differences in report.get("against", {}).items():
            behind += [
                f"{report['dataset']} {metric} vs {other}"
                for metric, (_, _, high) in differences.items() if high < 0
            ]  # fmt: skip
    print(f"\n# data sets (of {len(reports)}) where tooldb's ranking leads both of its single "
          "retrievers: " + ", ".join(f"{m} {n}" for m, n in leads.items()))  # fmt: skip
    print("# behind either beyond its 95% interval: " + (", ".join(behind) or "nowhere"))


def _lead(mean: float, low: float, high: float) -> str:
    return f"{mean:+.1f}" + ("*" if low > 0 or high < 0 else " ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", default=DATASETS)
    parser.add_argument("--max-queries", type=int, default=0, help="0 = every query")
    parser.add_argument("--embedder", default="auto")
    parser.add_argument("--lexical-share", type=float, default=None)
    parser.add_argument("--twin-cosine", type=float, default=None, help="1 = no twin merging")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--scale", action="store_true", help="speed at scale instead")
    parser.add_argument(
        "--lodo", action="store_true", help="leave-one-dataset-out check of the tuned choices"
    )
    selection_scale.add_arguments(parser)
    args = parser.parse_args()
    if args.scale:
        selection_scale.run(args)
        return
    if args.lodo:
        import selection_lodo
        from tooldb.embedders import open_embedder

        inner = open_embedder("local" if args.embedder == "auto" else args.embedder)
        assert inner is not None, "--lodo needs an embedder"
        cached = selection_scale.CachedEmbedder(inner, Path(args.cache).expanduser())
        selection_lodo.run(args.datasets, cached, args.max_queries)
        return
    overrides = {"embedder": args.embedder, "record_decisions": False, "record_calls": False}
    if args.lexical_share is not None:
        overrides["select_lexical_share"] = args.lexical_share
    if args.twin_cosine is not None:
        overrides["select_twin_cosine"] = args.twin_cosine
    cached = None
    if args.embedder in ("auto", "local", "local-int8"):
        from tooldb.embedders import open_embedder

        inner = open_embedder("local" if args.embedder == "auto" else args.embedder)
        if inner is not None:
            cached = selection_scale.CachedEmbedder(inner, Path(args.cache).expanduser())
            overrides["embedder"] = cached.id
    settings = replace(Settings(), **overrides)
    print(f"# embedder {settings.embedder}; lexical share {settings.select_lexical_share}")
    reports = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.datasets:
            report = evaluate(name, settings, args.max_queries, Path(workdir), cached)
            if cached is not None:
                cached.save()
            print_quality(report)
            sys.stdout.flush()
            reports.append(report)
    print_summary(reports)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))


if __name__ == "__main__":
    main()
