"""The pool a selection ranks: the allowed tools whose blended relevance is highest.

Relevance blends a dense score (cosine of task and tool vectors) and a BM25 score,
each turned into a z-score over the tools the selection may return, so neither
dominates by its units. Two ways to the same pool:

- ``exact_pool`` scores every allowed tool: registries below the HNSW threshold, and
  filtered selections that leave few tools (then only those are scored).
- ``approximate_pool`` (past the threshold): dense candidates from the HNSW graph,
  lexical candidates from the query terms' postings (every tool sharing a word is
  known exactly), their union rescored exactly. The z-score statistics: lexical ones
  exact from the postings (a tool without a query word scores 0; from a dense match,
  the sum from the terms' sums and the squares by one dot product); dense ones exact
  from sums over the enabled tools' vectors (dense_moments.py), or, for a filtered
  selection, estimated on a fixed random sample of the allowed tools. ``bench/select.py
  --scale`` measures how often its top 10 differs from the exact pool's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .index import Allowed, ToolIndex
from .lexical import LexicalMatch

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
        return cls.of_sums(total, squares, count, min_spread)

    @classmethod
    def of_sums(cls, total: float, squares: float, count: int, min_spread: float) -> Spread:
        """From the sum and the sum of squares of ``count`` scores."""
        if count <= 1:
            return cls(total, max(min_spread, 1e-6))
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
class Mix:
    """How a selection blends its two retrievers: the lexical ``share`` the task's coverage
    asks for, the near-twins' cosine (``merge_twins``), and the vectors' check of the
    words' best match (``vetted``)."""

    share: float
    twin_cosine: float = 1.0
    unrelated_z: float = -math.inf
    unrelated_share: float = 1.0
    #: Learning from use (evidence.py): z units added to allowed slots' blended relevance.
    learned: Mapping[int, float] | None = None

    def vetted(self, best_dense_z: float | None) -> float:
        """The lexical share once the vectors have judged the tool the words rank first:
        if its cosine is no better than ``unrelated_z`` spreads above the average tool's,
        the vectors see nothing of the task in it, and a word it shares with the task is
        more likely a coincidence (a stem two words share: "customer" and "custom") than
        the point: the share is multiplied by ``unrelated_share``. The check runs one way
        only: the vectors' best missing the task's words is what a paraphrase looks like.
        Measured on the seven data sets of bench/select.py (docs/selection.md)."""
        if best_dense_z is None or not 0.0 < self.share < 1.0:
            return self.share  # no words matched, no vectors, or one retriever alone counts
        return self.share * self.unrelated_share if best_dense_z < self.unrelated_z else self.share


def _judged(cosine: float, spread: Spread) -> float | None:
    """A cosine's z-score for ``Mix.vetted``, or None where the vectors barely tell the
    tools apart (their spread at its floor: a few near-identical tools), since then no
    tool is meaningfully above or below the average one."""
    if spread.spread <= MIN_DENSE_SPREAD:
        return None
    return (cosine - spread.mean) / spread.spread


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


def with_learned(fused: Floats, slots: Slots, learned: Mapping[int, float] | None) -> Floats:
    """``fused`` (scores of the sorted ``slots``) plus what evidence adds to some slots."""
    if not learned:
        return fused
    wanted = np.fromiter(learned.keys(), dtype=np.int64, count=len(learned))
    at = np.searchsorted(slots, wanted)
    inside = at < len(slots)
    inside[inside] = slots[at[inside]] == wanted[inside]
    shifted = fused.copy()
    shifted[at[inside]] += np.fromiter(learned.values(), dtype=np.float32, count=len(learned))[
        inside
    ]
    return shifted


def top(scores: Floats, size: int) -> Slots:
    """Positions of the ``size`` best scores (unordered)."""
    if size >= len(scores):
        return np.arange(len(scores), dtype=np.int64)
    return np.argpartition(-scores, size)[:size].astype(np.int64, copy=False)


#: ``top_of_many`` guesses its cut on every STRIDE-th score.
STRIDE = 8


def top_of_many(scores: Floats, size: int) -> Slots:
    """Positions of the ``size`` best positive scores (all of them if fewer), unordered:
    BM25 scores, sparse (every one positive) or dense (0 for a tool without a query
    word). For many scores and a small ``size`` (a long task's matches at 100,000 tools:
    ~30,000 of them, ~100 wanted) the cut is guessed on every 8th positive score, only
    the scores at or above it are partitioned, and a guess that keeps too few falls back
    to every positive score. Zeros are never partitioned: introselect over many equal
    values is slow (16,000 mostly zero: 1.1 ms; their positive ones: 20 µs). Which of
    several tools tied at the cut is kept may differ."""
    if len(scores) >= 64 * size and size >= 16:
        every = scores[::STRIDE].copy()  # contiguous: selecting from a strided view is slow
        every = every[every > 0]
        wanted = 2 * size // STRIDE  # about twice ``size`` survive the guess
        if len(every) > wanted:
            cut = np.partition(every, len(every) - wanted)[len(every) - wanted]
            kept = np.flatnonzero(scores >= cut)
            if len(kept) >= size:
                return kept[top(scores[kept], size)]
    positive = np.flatnonzero(scores > 0)
    return positive[top(scores[positive], size)]


def union(first: Slots, second: Slots) -> Slots:
    """Sorted distinct slots of both (``np.union1d``'s answer, without its hash table)."""
    merged = np.sort(np.concatenate([first, second]).astype(np.int64))
    return merged[np.concatenate(([True], merged[1:] != merged[:-1]))] if len(merged) else merged


#: The pool's best this many (by blended relevance) are checked for near-twins.
TWIN_TOP = 10


def merge_twins(
    index: ToolIndex,
    matched: LexicalMatch,
    pool: Pool,
    share: float,
    lexical: Spread,
    cosine: float,
    rows: Floats | None = None,
) -> Pool:
    """Near-twins among the pool's best ``TWIN_TOP``: tools whose vectors are at least
    ``cosine`` alike (descriptions that say the same thing) and that hold the same words
    of the task. Their BM25 scores then differ only by their documents' wording (a longer
    description, a word repeated), not by anything the task says: each twin blends the
    best lexical score among them, so the vectors order them and the group's place is set
    by its best words. A twin holding a task word the other lacks (a parameter the task
    names) keeps its own score. On apibench_tfhub, where several MobileNet feature
    extractors are described alike, the words chose the wrong twin 50 times where the
    vectors chose right, against 18 times the other way (docs/selection.md)."""
    if pool.dense is None or cosine >= 1.0 or len(pool.slots) < 2 or not 0 < share < 1:
        return pool  # nothing to merge, or only one retriever counts
    best = top(pool.fused, TWIN_TOP) if len(pool.slots) > TWIN_TOP else np.arange(len(pool.slots))
    # ``rows``: the pool's vectors, if the caller has them (saves a gather and a cast)
    vectors = rows[best] if rows is not None else index.dense.rows(pool.slots[best])
    alike = vectors @ vectors.T
    np.fill_diagonal(alike, -1.0)
    if float(alike.max()) < cosine:  # most selections: no twins
        return pool
    close = np.argwhere(np.triu(alike >= cosine, k=1))
    held = matched.words_held(pool.slots[best])
    group = list(range(len(best)))  # union-find over the best's positions

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i, j in close.tolist():
        if np.array_equal(held[i], held[j]):
            group[root(j)] = root(i)
    members: dict[int, list[int]] = {}
    for i in range(len(best)):
        members.setdefault(root(i), []).append(int(best[i]))
    fused = pool.fused.copy()
    for twins in members.values():
        if len(twins) > 1:
            raw = pool.lexical[twins]
            fused[twins] += share * (raw.max() - raw) / lexical.spread
    return Pool(pool.slots, pool.dense, pool.lexical, fused)


def exact_pool(
    index: ToolIndex,
    matched: LexicalMatch,
    query: Floats | None,
    allowed: Allowed,
    mix: Mix,
    size: int,
) -> Pool:
    """Score every allowed tool. With the graph built (a large registry) only the allowed
    slots are scored, from the 16-bit matrix; otherwise the whole float32 matrix at once."""
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
    best_at = int(lexical.argmax()) if len(lexical) else 0  # the lowest of tied positions
    best_lexical = float(lexical[best_at]) if len(lexical) else 0.0
    lexical_spread = Spread.of(lexical, MIN_LEXICAL_SPREAD * best_lexical)
    dense_spread = Spread.of(dense, MIN_DENSE_SPREAD) if dense is not None else None
    share = mix.share
    if dense is not None and dense_spread is not None and best_lexical > 0:
        share = mix.vetted(_judged(float(dense[best_at]), dense_spread))
    fused = with_learned(
        blend(dense, lexical, dense_spread, lexical_spread, share), subset, mix.learned
    )
    chosen = top(fused, size)
    pool = Pool(
        subset[chosen], dense[chosen] if dense is not None else None, lexical[chosen], fused[chosen]
    )
    return merge_twins(index, matched, pool, share, lexical_spread, mix.twin_cosine)


@dataclass(frozen=True)
class AllowedLexical:
    """The BM25 scores of the allowed tools: ``values`` of the ``slots`` with a query
    term (ascending), or, with ``slots`` None, ``values`` is every slot's score (a dense
    match, every alive tool allowed; ``total`` their sum). Zeros add nothing to the
    statistics either way. ``best``: the slot of the best score (the lowest of tied
    ones), None if nothing matched."""

    slots: npt.NDArray[np.signedinteger[Any]] | None
    values: Floats
    best: int | None
    best_score: float
    total: float = 0.0
    match: LexicalMatch | None = None  # the dense one

    @classmethod
    def of(cls, matched: LexicalMatch, allowed: Allowed, documents: int) -> AllowedLexical:
        """``documents``: the alive tools of the lexical index; fewer allowed means a filter."""
        if allowed.count >= documents:
            every = matched.dense_scores
            if every is not None:
                at = int(every.argmax())
                score = float(every[at])
                best = at if score > 0 else None
                return cls(None, every, best, score, matched.score_total, matched)
        hits, scores = matched.hits, matched.scores
        if len(hits) and allowed.count < documents:
            keep = allowed.mask[hits]
            hits, scores = hits[keep].astype(np.int64), scores[keep]
        if not len(hits):
            return cls(hits, scores, None, 0.0)
        at = int(scores.argmax())
        return cls(hits, scores, int(hits[at]), float(scores[at]))

    def spread(self, count: int) -> Spread:
        """The mean and spread of the BM25 score over ``count`` allowed tools."""
        floor = MIN_LEXICAL_SPREAD * self.best_score
        if self.slots is not None:
            return Spread.sparse(self.values, count, floor)
        # dense: the sum from the terms' sums (no pass over every slot), the squares by a dot
        return Spread.of_sums(self.total, float(np.dot(self.values, self.values)), count, floor)

    def top(self, count: int) -> Slots:
        """Slots of up to ``count`` best matching tools (unordered). From dense scores, the
        cut is the ``count``-th best score among the tools with the query's rarest words
        (at least that many tools score as well: exact, and ~35 µs for a scan at 100,000
        tools instead of ~120 for a sampled guess), then only the tools at or above it
        are partitioned."""
        values = self.values
        if self.slots is not None:
            return self.slots[top_of_many(values, count)].astype(np.int64, copy=False)
        assert self.match is not None
        rare = values[self.match.rare_postings(2 * count)]
        if len(rare) >= count:
            cut = np.partition(rare, len(rare) - count)[len(rare) - count]
            if cut > 0:
                kept = np.flatnonzero(values >= cut)
                if len(kept) >= count:  # fewer: a tool counted twice among the rare
                    return kept[top(values[kept], count)]
        return top_of_many(values, count)


def approximate_pool(
    index: ToolIndex,
    matched: LexicalMatch,
    lexical_scores: AllowedLexical,
    query: Floats,
    allowed: Allowed,
    mix: Mix,
    size: int,
) -> Pool:
    """Candidates from the graph and from the postings, rescored exactly; see the module."""
    per_side = max(math.ceil(CANDIDATES_PER_POOLED * size), CANDIDATES_MIN)
    memo = allowed.memo if allowed.memo is not None else {}
    graph = memo.get("graph")
    if graph is None:  # the graph's length is fixed until the next reload, as is ``allowed``
        graph = memo["graph"] = index.dense.graph_filter(allowed.mask)
    dense_side = index.dense.nearest(query, per_side, graph)
    lexical_side = lexical_scores.top(per_side)
    candidates = union(dense_side, lexical_side)
    if mix.learned:  # tools the evidence speaks for are rescored even if neither side found them
        candidates = union(candidates, np.fromiter(mix.learned, dtype=np.int64))
    rows = index.dense.rows(candidates)  # kept: the twins' check reuses the pool's
    dense = np.asarray(rows @ query, dtype=np.float32)
    lexical = matched.at(candidates)
    lexical_spread = lexical_scores.spread(allowed.count)
    exact = index.dense_moments(query, allowed)
    if exact is not None:
        dense_spread = Spread(exact[0], max(exact[1], MIN_DENSE_SPREAD, 1e-6))
    else:
        dense_spread = Spread.of(
            index.sample_scores(query, allowed, DENSE_SAMPLE), MIN_DENSE_SPREAD
        )
    share = mix.share
    best = lexical_scores.best
    if best is not None:  # among the candidates: the lexical side holds the best score
        at = int(candidates.searchsorted(best))
        cosine = dense[at] if at < len(candidates) and candidates[at] == best else None
        if cosine is None:
            cosine = index.dense.rows(np.array([best], dtype=np.int64))[0] @ query
        share = mix.vetted(_judged(float(cosine), dense_spread))
    fused = blend(dense, lexical, dense_spread, lexical_spread, share)
    fused = with_learned(fused, candidates, mix.learned)
    chosen = top(fused, size)
    pool = Pool(candidates[chosen], dense[chosen], lexical[chosen], fused[chosen])
    return merge_twins(index, matched, pool, share, lexical_spread, mix.twin_cosine, rows[chosen])
