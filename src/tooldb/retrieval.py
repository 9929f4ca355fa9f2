"""The pool a selection ranks: the allowed tools whose blended relevance is highest.

Relevance blends a dense score (cosine of task and tool vectors) and a BM25 score,
each turned into a z-score over the tools the selection may return, so neither
dominates by its units. Two ways to the same pool:

- ``exact_pool`` scores every allowed tool: registries below the HNSW threshold, and
  filtered selections that leave few tools (then only those are scored).
- ``approximate_pool`` (past the threshold): dense candidates from the HNSW graph,
  lexical candidates from the query terms' postings (every tool sharing a word is
  known exactly), their union rescored exactly. The z-score statistics: lexical ones
  exact from the postings (a tool without a query word scores 0); dense ones exact
  from sums over the enabled tools' vectors (dense_moments.py), or, for a filtered
  selection, estimated on a fixed random sample of the allowed tools. ``bench/selection.py
  --scale`` measures how often its top 10 differs from the exact pool's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .lexical import LexicalMatch
from .tool_index import Allowed, ToolIndex

Floats = npt.NDArray[np.float32]
Slots = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

#: Smallest spreads a z-score divides by: in a registry of a few near-identical tools the
#: spread is near zero, and dividing by it would turn a hair's difference into a full one.
MIN_DENSE_SPREAD = 0.02  # cosine units
MIN_LEXICAL_SPREAD = 0.05  # times the best BM25 score
#: Past the HNSW threshold, a filter that leaves at most this many tools is served exactly.
EXACT_SUBSET_MAX = 5_000
#: Tools on which the dense mean and spread are estimated (standard error ~2% of the spread).
DENSE_SAMPLE = 2_048
#: Each retriever contributes this many candidates per pooled tool to the union, and
#: at least ``CANDIDATES_MIN``: 64 for the usual pool of 50. Measured at 100,000 tools
#: (MiniLM, 200 real tasks, recall@10 of the exact ranking): 100 per side with the walk at
#: efSearch 128 gave 1.000 with a 0.82 ms walk; 64 at efSearch 64, 0.995 with 0.53 ms
#: (select 2.39 -> 1.89 ms); 32, 0.981 (docs/selection.md).
CANDIDATES_PER_POOLED = 1.25
CANDIDATES_MIN = 64


@dataclass(frozen=True)
class Spread:
    """Mean and spread of a score over the allowed tools: what a z-score needs."""

    mean: float
    spread: float

    @classmethod
    def of(cls, values: Floats, min_spread: float) -> Spread:
        if len(values) > 1:
            mean, spread = moments(values)
        else:
            mean, spread = (float(values.mean()) if len(values) else 0.0), 0.0
        return cls(mean, max(spread, min_spread, 1e-6))

    @classmethod
    def sparse(cls, nonzero: Floats, count: int, min_spread: float) -> Spread:
        """From the nonzero values of ``count`` scores (the rest being 0)."""
        if count <= 1:
            return cls(float(nonzero.sum()), max(min_spread, 1e-6))
        total = float(np.add.reduce(nonzero))  # float32 pairwise sums, then a dot
        squares = float(np.dot(nonzero, nonzero))  # product: ~1e-6 relative, no copy
        mean = total / count
        variance = max(squares / count - mean * mean, 0.0)
        return cls(mean, max(variance**0.5, min_spread, 1e-6))

    def z(self, scores: Floats) -> Floats:
        return ((scores - self.mean) / self.spread).astype(np.float32, copy=False)


def moments(values: Floats) -> tuple[float, float]:
    """``(values.mean(), values.std())`` of float32 values, bit for bit, without the ~10 µs
    of Python around each: numpy's steps (float32 pairwise sums; each division done in
    float64 and rounded to float32; a float32 square root, which a float64 root rounded
    to float32 equals exactly). A test holds it to numpy's own results."""
    count = len(values)
    mean = float(np.float32(float(np.add.reduce(values)) / count))
    deviations = values - mean  # the mean is a float32 value: exact as a weak scalar
    np.multiply(deviations, deviations, out=deviations)
    variance = float(np.float32(float(np.add.reduce(deviations)) / count))
    return mean, float(np.float32(math.sqrt(variance)))


@dataclass(frozen=True)
class Pool:
    """The pooled slots with their raw and fused scores (parallel arrays)."""

    slots: Slots
    dense: Floats | None
    lexical: Floats
    fused: Floats


def blend(
    dense: Floats | None,
    lexical: Floats,
    dense_spread: Spread | None,
    lexical_spread: Spread,
    share: float,
) -> Floats:
    """z-scores mixed with the task's lexical ``share`` (lexical only without vectors)."""
    lexical_z = lexical_spread.z(lexical)
    if dense is None or dense_spread is None:
        return lexical_z
    fused = (1.0 - share) * dense_spread.z(dense) + share * lexical_z
    return fused.astype(np.float32, copy=False)


def top(scores: Floats, size: int) -> Slots:
    """Positions of the ``size`` best scores (unordered)."""
    if size >= len(scores):
        return np.arange(len(scores), dtype=np.int64)
    return np.argpartition(-scores, size)[:size].astype(np.int64, copy=False)


#: ``top_of_many`` guesses its cut on every STRIDE-th score.
STRIDE = 8


def top_of_many(scores: Floats, size: int) -> Slots:
    """``top`` for many scores and a small ``size`` (a long task's BM25 matches at
    100,000 tools: ~30,000 of them, ~100 wanted): the cut is guessed on every 8th score,
    only the scores at or above it are partitioned, and a guess that keeps too few falls
    back to the whole. Which of several tools tied at the cut is kept may differ."""
    count = len(scores)
    if count < 64 * size or size < 16:
        return top(scores, size)
    every = scores[::STRIDE]
    wanted = 2 * size // STRIDE  # about twice ``size`` survive the guess
    cut = np.partition(every, len(every) - wanted)[len(every) - wanted]
    kept = np.flatnonzero(scores >= cut)
    if len(kept) < size:
        return top(scores, size)
    return kept[top(scores[kept], size)]


def union(first: Slots, second: Slots) -> Slots:
    """Sorted distinct slots of both (``np.union1d``'s answer, without its hash table)."""
    merged = np.sort(np.concatenate([first, second]).astype(np.int64))
    return merged[np.concatenate(([True], merged[1:] != merged[:-1]))] if len(merged) else merged


def exact_pool(
    index: ToolIndex,
    matched: LexicalMatch,
    query: Floats | None,
    allowed: Allowed,
    share: float,
    size: int,
) -> Pool:
    """Score every allowed tool. With the graph built (a large registry) only the allowed
    slots are scored, from the float16 matrix; otherwise the whole float32 matrix at once."""
    subset = allowed.slots
    every = len(subset) == index.size  # then indexing by ``subset`` would only copy
    if 8 * len(subset) < index.size:
        lexical = matched.at(subset)
    else:
        lexical = matched.dense(index.size)
        lexical = lexical if every else lexical[subset]
    dense = None
    if query is not None and index.dense.approximate:
        dense = index.dense.scores_for(query, subset)
    elif query is not None:
        dense = index.dense.scores(query, index.size)
        dense = dense if every else dense[subset]
    best_lexical = float(np.maximum.reduce(lexical)) if len(lexical) else 0.0
    lexical_spread = Spread.of(lexical, MIN_LEXICAL_SPREAD * best_lexical)
    dense_spread = Spread.of(dense, MIN_DENSE_SPREAD) if dense is not None else None
    fused = blend(dense, lexical, dense_spread, lexical_spread, share)
    chosen = top(fused, size)
    return Pool(
        subset[chosen], dense[chosen] if dense is not None else None, lexical[chosen], fused[chosen]
    )


def approximate_pool(
    index: ToolIndex,
    matched: LexicalMatch,
    hits: npt.NDArray[np.signedinteger[Any]],
    hit_scores: Floats,
    query: Floats,
    allowed: Allowed,
    share: float,
    size: int,
) -> Pool:
    """Candidates from the graph and from the postings, rescored exactly; see the module.
    ``hits`` are the allowed slots with a query term, ascending, ``hit_scores`` theirs."""
    per_side = max(math.ceil(CANDIDATES_PER_POOLED * size), CANDIDATES_MIN)
    memo = allowed.memo if allowed.memo is not None else {}
    graph = memo.get("graph")
    if graph is None:  # the graph's length is fixed until the next reload, as is ``allowed``
        graph = memo["graph"] = index.dense.graph_filter(allowed.mask)
    dense_side = index.dense.nearest(query, per_side, graph)
    lexical_side = hits[top_of_many(hit_scores, per_side)]
    candidates = union(dense_side, lexical_side)
    dense = index.dense.scores_for(query, candidates)
    lexical = matched.at(candidates)
    best_lexical = float(np.maximum.reduce(hit_scores)) if len(hit_scores) else 0.0
    lexical_spread = Spread.sparse(hit_scores, allowed.count, MIN_LEXICAL_SPREAD * best_lexical)
    exact = index.dense_moments(query, allowed)
    if exact is not None:
        dense_spread = Spread(exact[0], max(exact[1], MIN_DENSE_SPREAD, 1e-6))
    else:
        dense_spread = Spread.of(
            index.sample_scores(query, allowed, DENSE_SAMPLE), MIN_DENSE_SPREAD
        )
    fused = blend(dense, lexical, dense_spread, lexical_spread, share)
    chosen = top(fused, size)
    return Pool(candidates[chosen], dense[chosen], lexical[chosen], fused[chosen])
