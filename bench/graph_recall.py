"""How much of the exact dense top 10 the HNSW walk finds, on MiniLM vectors at 100,000.

There are ~11,000 real tools in ../shared/data; embedding 100,000 spliced descriptions
with MiniLM takes most of an hour on two cores. So the registry is stood in for by the
real tools' MiniLM vectors plus mixtures of two of them (normalised sums, the vectors'
counterpart of ``selection.py --scale``'s spliced descriptions), and the queries are
real ones from every data set. For each graph recipe (M, efConstruction) and search
(efSearch, how many it returns) it prints the share of each query's exact top 10 (every
vector scored) that the walk returns, the build time, and the walk's p50. Vectors are
cached by text (``~/.cache/tooldb-bench``) like ``--scale``'s.

    .venv/bin/python bench/graph_recall.py                  # ~3 min after the first run
    .venv/bin/python bench/graph_recall.py --size 40000 --queries 200
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from selection import tool_spec  # noqa: E402
from selection_scale import CachedEmbedder  # noqa: E402
from tooldb.embedders import open_embedder  # noqa: E402
from tooldb.errors import DefinitionError  # noqa: E402
from tooldb.selection import ann  # noqa: E402
from tooldb.selection.documents import tool_document  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
RECIPES = ((16, 64), (16, 128), (32, 64))  # (M, efConstruction)
SEARCHES = ((128, 100), (64, 100), (64, 64))  # (efSearch, returned)


def texts() -> tuple[list[str], list[str]]:
    """Every data set's tool documents and (up to 200 per set) query texts."""
    documents, queries = [], []
    for folder in sorted(DATA.iterdir()):
        if not (folder / "tools.jsonl").exists():
            continue
        for line in (folder / "tools.jsonl").open(encoding="utf-8"):
            with contextlib.suppress(DefinitionError):  # an id that is no usable name
                documents.append(tool_document(tool_spec(json.loads(line))))
        lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        queries.extend(json.loads(line)["query"] for line in lines[:: max(1, len(lines) // 200)])
    return documents, queries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=420)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--cache", default="~/.cache/tooldb-bench")
    args = parser.parse_args()
    import faiss

    cached = CachedEmbedder(open_embedder(args.embedder), Path(args.cache).expanduser())
    documents, query_texts = texts()
    rng = np.random.default_rng(0)
    query_texts = [query_texts[i] for i in rng.permutation(len(query_texts))[: args.queries]]
    real = cached.embed(documents).astype(np.float32)
    queries = cached.embed(query_texts).astype(np.float32)
    cached.save()
    extra = max(args.size - len(real), 0)
    first, second = rng.integers(0, len(real), extra), rng.integers(0, len(real), extra)
    mixed = real[first] + real[second]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    vectors = np.ascontiguousarray(np.concatenate([real, mixed])[: args.size])
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    print(f"# {len(vectors):,} vectors ({len(real):,} real tools, the rest mixtures of two), "
          f"{len(queries)} real queries, {cached.id}")  # fmt: skip
    print(f"{'M':>3} {'efC':>4} {'build s':>8} {'efSearch':>9} {'returned':>9} "
          f"{'top-10 found':>13} {'p50 µs':>7}")  # fmt: skip
    for connectivity, expansion_add in RECIPES:
        graph = faiss.IndexHNSWSQ(
            vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, connectivity,
            faiss.METRIC_INNER_PRODUCT,
        )  # fmt: skip
        graph.hnsw.efConstruction = expansion_add
        graph.train(vectors)
        faiss.omp_set_num_threads(2)
        started = time.perf_counter()
        graph.add(vectors)
        build = time.perf_counter() - started
        faiss.omp_set_num_threads(1)
        for expansion_search, returned in SEARCHES:
            params = faiss.SearchParametersHNSW(efSearch=max(expansion_search, returned))
            found, times = [], []
            for i in range(len(queries)):
                started = time.perf_counter()
                _, ids = graph.search(queries[i : i + 1], returned, params=params)
                times.append(time.perf_counter() - started)
                found.append(len(set(ids[0].tolist()) & set(exact[i].tolist())) / 10)
            mark = " <- tooldb" if (connectivity, expansion_add, expansion_search) == (
                ann.CONNECTIVITY, ann.EXPANSION_ADD, ann.EXPANSION_SEARCH) else ""  # fmt: skip
            print(f"{connectivity:>3} {expansion_add:>4} {build:>8.1f} {expansion_search:>9} "
                  f"{returned:>9} {np.mean(found):>13.3f} "
                  f"{statistics.median(times) * 1e6:>7.0f}{mark}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
