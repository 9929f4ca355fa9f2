"""BM25 over tool documents, in process, updated incrementally.

In-process rather than SQLite FTS5 / PostgreSQL full-text: the same scores on
both backends (PostgreSQL's ts_rank is not BM25), and scoring happens next to the
dense index so the two are fused without a round trip. idf and length
normalisation are computed at query time, so adding a document never rewrites the
others.

Layout, for memory at 100,000 tools (~200,000 distinct terms, most seen once): the
postings of every term sit in three flat arrays (slots, term frequencies, and per
term an offset: compressed sparse rows), with no Python object per term. Documents
added since are appended to a flat tail, looked up through a small index of it and
merged into the rows once it grows. A query touches only its terms' postings; each
term's BM25 weights are kept until the next change (they depend on the document
count and the average length), so a query term costs one scatter-add. A match with
few postings returns its slots sparsely (sorted out of the postings); one whose
postings cover more than 1/48 of the slots keeps the dense score array it summed
into, since finding its ~30,000 matched slots at 100,000 tools cost more than the
scoring (BM25 in a select ~290 -> ~180 µs p50): the selection asks it only for a
few scores, its best 64 and its statistics.

A query term counts once however often the task repeats it (query-side tf is binary,
BM25 with k3 = 0): a task of several steps repeats its generic verbs ("retrieve ...,
then retrieve ..., analyze ..."), and counting them multiplied the weight of the least
telling words. Measured with bench/select.py: BM25 R@5 on sealtools 82.7 -> 87.6,
toolbench 69.6 -> 70.7, better or level on the other sets (docs/selection.md).
"""

from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np
import numpy.typing as npt

from .documents import terms

K1 = 1.5
B = 0.75
#: Past this many tail postings, the next query merges the tail into the rows.
TAIL_MERGE = 16_384
#: Weights kept between queries: at most this many postings and terms. A posting costs its
#: float32 weight (its slot is the postings' own int32 row, copied only for a term with
#: removed tools or unmerged additions): 8-16 MB when full, held at 12 bytes to 1,000,000
#: before, which 200 long tasks over 100,000 tools overflowed (BM25 p50 360 -> 192 µs).
CACHED_POSTINGS = 2_000_000
CACHED_TERMS = 20_000
#: A match touching fewer postings than 1/SPARSE_BELOW of the slots is returned sparse
#: (its slots sorted out of the postings); more, and it keeps dense scores over every
#: slot. Measured at 131,072 slots: sorting 3,000 postings cost what scanning every slot
#: does (~35 µs), and 25,000 ten times that.
SPARSE_BELOW = 48
#: Queries up to this long keep their parsed terms (4,096 of them: at most ~8 MB).
QUERY_CACHE_CHARS = 2_000

#: Slot numbers: int32 when they are a term's postings as stored, intp when computed.
Slots = npt.NDArray[np.int32] | npt.NDArray[np.intp]
Floats = npt.NDArray[np.float32]


class _Weights:
    """One term's alive postings and their BM25 weights (idf included), and the weights'
    sum: what the term adds to the sum of every tool's score."""

    __slots__ = ("idf", "slots", "total", "weights")

    def __init__(self, idf: float, slots: Slots, weights: Floats) -> None:
        self.idf, self.slots, self.weights = idf, slots, weights
        self.total = float(np.add.reduce(weights, dtype=np.float64)) if len(weights) else 0.0


class _Growing:
    """A flat numpy array appended to in chunks (capacity doubles)."""

    __slots__ = ("count", "data")

    def __init__(self, dtype: type[np.generic]) -> None:
        self.data = np.zeros(0, dtype=dtype)
        self.count = 0

    def extend(self, values: npt.ArrayLike) -> None:
        values = np.asarray(values, dtype=self.data.dtype)
        end = self.count + len(values)
        if end > len(self.data):
            grown = np.zeros(max(end, 2 * len(self.data), 1024), dtype=self.data.dtype)
            grown[: self.count] = self.data[: self.count]
            self.data = grown
        self.data[self.count : end] = values
        self.count = end

    def view(self) -> npt.NDArray[np.generic]:
        return self.data[: self.count]


class BM25Index:
    """Documents live in slots, added in increasing slot order; a removed document's slot
    is dead until the owner compacts (rebuilds the index)."""

    def __init__(self) -> None:
        self._term_ids: dict[str, int] = {}
        # Merged postings of term t: rows [_offsets[t], _offsets[t + 1]) of the arrays.
        self._offsets = np.zeros(1, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int32)
        self._tfs = np.zeros(0, dtype=np.uint16)  # a document is at most 100,000 chars
        self._tail_terms = _Growing(np.int32)
        self._tail_slots = _Growing(np.int32)
        self._tail_tfs = _Growing(np.uint16)
        self._tail_sorted: tuple[npt.NDArray[np.int32], npt.NDArray[np.intp]] | None = None
        self._lengths = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._dead = 0
        self._total_length = 0.0
        self._docs = 0
        self._cache: dict[str, _Weights] = {}
        self._cached = 0
        self._scratch = np.zeros(0, dtype=np.float32)

    @property
    def documents(self) -> int:
        """Alive documents."""
        return self._docs

    def add(self, slot: int, text: str) -> None:
        words = terms(text)
        if slot >= len(self._lengths):
            size = max(slot + 1, len(self._lengths) * 2, 16)
            self._lengths = np.resize(self._lengths, size)
            self._alive = np.resize(self._alive, size)
            self._lengths[slot:] = 0
            self._alive[slot:] = False
        self._lengths[slot] = len(words)
        self._alive[slot] = True
        self._total_length += len(words)
        self._docs += 1
        counts = Counter(words)
        ids = self._term_ids
        self._tail_terms.extend([ids.setdefault(term, len(ids)) for term in counts])
        self._tail_slots.extend([slot] * len(counts))
        self._tail_tfs.extend(list(counts.values()))
        self._tail_sorted = None
        self._changed()

    def remove(self, slot: int) -> None:
        if slot < len(self._alive) and self._alive[slot]:
            self._alive[slot] = False
            self._total_length -= float(self._lengths[slot])
            self._docs -= 1
            self._dead += 1
            self._changed()

    def _changed(self) -> None:
        """Every weight depends on the document count and average length: drop them."""
        if self._cache:
            self._cache.clear()
            self._cached = 0

    def settle(self) -> None:
        """Fold a long tail into the rows now (after a load) rather than in a query."""
        if self._tail_terms.count > TAIL_MERGE:
            self._merge()

    def match(self, query: str) -> LexicalMatch:
        """The slots with a query term and their BM25 scores, with each matched term's
        idf and postings. Touches only the query terms' postings."""
        self.settle()
        found: list[tuple[float, Slots]] = []
        total = 0.0
        touched = 0
        scratch = self._scratch
        if len(scratch) < len(self._lengths):
            scratch = self._scratch = np.zeros(len(self._lengths), dtype=np.float32)
        for term in query_terms(query):
            entry = self._weights(term)
            if len(entry.slots) == 0:
                continue
            # Term by term in the query's order, as a dense accumulation would: the same
            # float32 sums. A slot appears once per term, so add.at is exact.
            np.add.at(scratch, entry.slots, entry.weights)
            found.append((entry.idf, entry.slots))
            touched += len(entry.slots)
            total += entry.total
        if touched * SPARSE_BELOW >= len(scratch):
            # Many postings: the match keeps the scratch as its dense scores (collecting
            # them cost more than the accumulation); the next match gets a fresh one.
            self._scratch = np.zeros(0, dtype=np.float32)
            return LexicalMatch.of_dense(scratch, found, total)
        hits, scores = self._collect(found)
        return LexicalMatch(hits, scores, found)

    def _collect(self, found: list[tuple[float, Slots]]) -> tuple[Slots, Floats]:
        """The touched slots in order with their scores (few of them: sorted rather than
        found by a scan of every slot); the scratch is zeroed again."""
        if not found:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float32)
        scratch = self._scratch
        if len(found) == 1:
            hits = found[0][1]
        else:
            merged = np.sort(np.concatenate([slots for _, slots in found]))
            hits = merged[np.concatenate(([True], merged[1:] != merged[:-1]))]
        scores = scratch[hits]
        scratch[hits] = 0.0
        return hits, scores

    def _weights(self, term: str) -> _Weights:
        cached = self._cache.get(term)
        if cached is not None:
            return cached
        slots, tfs = self._postings(term)
        if self._dead and len(slots):
            alive = self._alive[slots]
            slots, tfs = slots[alive], tfs[alive]
        idf = _idf(self._docs, len(slots))
        average = max(self._total_length / self._docs, 1.0) if self._docs else 1.0
        # The expression's order is the scores' definition (float32, left to right).
        frequencies = tfs.astype(np.float32)
        norm = K1 * (1.0 - B + B * self._lengths[slots] / average)
        weights = idf * frequencies * (K1 + 1.0) / (frequencies + norm)
        entry = _Weights(idf, slots, weights.astype(np.float32, copy=False))
        self._cache[term] = entry
        self._cached += len(slots)
        while len(self._cache) > 1 and (
            self._cached > CACHED_POSTINGS or len(self._cache) > CACHED_TERMS
        ):  # the oldest first
            evicted = self._cache.pop(next(iter(self._cache)))
            self._cached -= len(evicted.slots)
        return entry

    def _postings(self, term: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint16]]:
        """A term's postings (ascending slots, dead ones included) and frequencies."""
        term_id = self._term_ids.get(term)
        merged = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint16)
        if term_id is None:
            return merged
        if term_id + 1 < len(self._offsets):
            start, stop = self._offsets[term_id], self._offsets[term_id + 1]
            merged = self._slots[start:stop], self._tfs[start:stop]
        if not self._tail_terms.count:
            return merged
        terms_, order = self._tail_order()
        start, stop = np.searchsorted(terms_, [term_id, term_id + 1])
        if start == stop:
            return merged
        rows = order[start:stop]
        tail = self._tail_slots.view()[rows], self._tail_tfs.view()[rows]
        return np.concatenate([merged[0], tail[0]]), np.concatenate([merged[1], tail[1]])

    def _tail_order(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.intp]]:
        """The tail's terms sorted, and its rows in that order (stable: slots ascend within
        a term); sorted once per addition."""
        if self._tail_sorted is None:
            terms_: npt.NDArray[np.int32] = self._tail_terms.view()  # type: ignore[assignment]
            order = np.argsort(terms_, kind="stable")
            self._tail_sorted = terms_[order], order
        return self._tail_sorted

    def _merge(self) -> None:
        """Fold the tail into the rows: one stable sort by term keeps slots ascending."""
        counts = np.diff(self._offsets)
        old_terms = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        all_terms = np.concatenate([old_terms, self._tail_terms.view()])
        order = np.argsort(all_terms, kind="stable")
        self._slots = np.concatenate([self._slots, self._tail_slots.view()])[order]
        self._tfs = np.concatenate([self._tfs, self._tail_tfs.view()])[order]
        per_term = np.bincount(all_terms, minlength=len(self._term_ids))
        self._offsets = np.concatenate(([0], np.cumsum(per_term))).astype(np.int64)
        self._tail_terms = _Growing(np.int32)
        self._tail_slots = _Growing(np.int32)
        self._tail_tfs = _Growing(np.uint16)
        self._tail_sorted = None

    def scores(self, query: str, size: int) -> Floats:
        """BM25 score of every slot below ``size`` (0 without a query term, or dead)."""
        return self.match(query).dense(size)

    def nbytes(self) -> int:
        arrays = (self._offsets, self._slots, self._tfs, self._lengths, self._alive)
        tails = (self._tail_terms, self._tail_slots, self._tail_tfs)
        return sum(a.nbytes for a in arrays) + sum(t.data.nbytes for t in tails)


def query_terms(query: str) -> tuple[str, ...]:
    """A query's distinct terms in order of appearance (each counts once: see the
    module). Agents ask with the same few tasks again and again: short ones are
    remembered."""
    if len(query) <= QUERY_CACHE_CHARS:
        return _cached_query_terms(query)
    return tuple(dict.fromkeys(terms(query)))


@functools.lru_cache(maxsize=4096)
def _cached_query_terms(query: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(terms(query)))


def _idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


class LexicalMatch:
    """One query's BM25 scores: sparse (the slots with a query term, ascending, and
    their scores) or dense (a score per slot, 0 without a query term; a long task's
    match at a large registry), with per matched term its idf and (ascending) slots.
    Either form answers every question; the sparse one is made from the dense on demand."""

    __slots__ = ("_dense", "_found", "_hits", "_scores", "_total")

    def __init__(self, hits: Slots, scores: Floats, found: list[tuple[float, Slots]]) -> None:
        self._hits: Slots | None = hits
        self._scores: Floats | None = scores
        self._dense: Floats | None = None
        self._found = found
        self._total: float | None = None

    @classmethod
    def of_dense(
        cls, dense: Floats, found: list[tuple[float, Slots]], total: float
    ) -> LexicalMatch:
        """``total``: the sum of every slot's score (from the terms' sums, in float64)."""
        match = cls.__new__(cls)
        match._hits = match._scores = None
        match._dense, match._found = dense, found
        match._total = total
        return match

    @property
    def score_total(self) -> float:
        """The sum of every slot's score (float64)."""
        if self._total is None:
            self._total = float(np.add.reduce(self.scores, dtype=np.float64))
        return self._total

    @property
    def hits(self) -> Slots:
        if self._hits is None:
            assert self._dense is not None
            self._hits = np.flatnonzero(self._dense > 0)
        return self._hits

    @property
    def scores(self) -> Floats:
        if self._scores is None:
            assert self._dense is not None
            self._scores = self._dense[self.hits]
        return self._scores

    def rare_postings(self, count: int) -> Slots:
        """Slots from the postings of the query's rarest terms, at least ``count`` of them
        where the terms hold that many (repeats possible): the tools likeliest to score
        best, whose scores bound the best ``count``'s from below."""
        lists = sorted((slots for _, slots in self._found), key=len)
        chosen: list[Slots] = []
        held = 0
        for slots in lists:
            chosen.append(slots)
            held += len(slots)
            if held >= count:
                break
        if len(chosen) > 1:
            joined: Slots = np.concatenate(chosen)  # type: ignore[assignment]
            return joined
        return chosen[0] if chosen else np.zeros(0, dtype=np.intp)

    @property
    def dense_scores(self) -> Floats | None:
        """Every slot's score (read only), if the match is dense; else None."""
        return self._dense

    def at(self, slots: npt.NDArray[np.integer]) -> Floats:
        """The scores of ``slots`` (0 for a slot without a query term)."""
        dense = self._dense
        if dense is not None:
            if len(slots) and int(slots.max()) >= len(dense):
                return np.where(slots < len(dense), dense[np.minimum(slots, len(dense) - 1)], 0)
            return dense[slots]
        hits = self.hits
        if not len(hits):
            return np.zeros(len(slots), dtype=np.float32)
        at = np.minimum(np.searchsorted(hits, slots), len(hits) - 1)
        return np.where(hits[at] == slots, self.scores[at], np.float32(0.0))

    def dense(self, size: int) -> Floats:
        """The scores of slots 0 to ``size`` - 1 (a new array)."""
        out = np.zeros(size, dtype=np.float32)
        if self._dense is not None:
            shared = min(size, len(self._dense))
            out[:shared] = self._dense[:shared]
            return out
        hits, scores = self.hits, self.scores
        if len(hits) and hits[-1] >= size:
            below = hits < size
            out[hits[below]] = scores[below]
        else:
            out[hits] = scores
        return out

    def words_held(self, slots: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
        """Which of the query's matched terms each of ``slots`` holds: one row per slot,
        one column per term (binary searches in the postings, which are in slot order)."""
        held = np.zeros((len(slots), len(self._found)), dtype=bool)
        for column, (_, postings) in enumerate(self._found):
            if len(postings):
                at = np.minimum(postings.searchsorted(slots), len(postings) - 1)
                held[:, column] = postings[at] == slots
        return held
