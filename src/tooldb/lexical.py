"""BM25 over tool documents, in process, updated incrementally.

In-process rather than SQLite FTS5 / PostgreSQL full-text: the same scores on
both backends (PostgreSQL's ts_rank is not BM25), and scoring happens next to the
dense index so the two are fused without a round trip. Postings are kept per
term as growing arrays of (slot, term frequency); idf and length normalisation
are computed at query time, so adding a document never rewrites the others.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import numpy.typing as npt

from .tooltext import terms

K1 = 1.5
B = 0.75


class _Postings:
    __slots__ = ("count", "slots", "tfs")

    def __init__(self) -> None:
        self.slots = np.empty(4, dtype=np.int32)
        self.tfs = np.empty(4, dtype=np.float32)
        self.count = 0

    def add(self, slot: int, tf: int) -> None:
        if self.count == len(self.slots):
            self.slots = np.resize(self.slots, self.count * 2)
            self.tfs = np.resize(self.tfs, self.count * 2)
        self.slots[self.count] = slot
        self.tfs[self.count] = tf
        self.count += 1


class BM25Index:
    """Documents live in slots; a removed document's slot is dead until compaction."""

    def __init__(self) -> None:
        self._postings: dict[str, _Postings] = {}
        self._lengths = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._total_length = 0.0
        self._docs = 0

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
        for term, tf in Counter(words).items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = _Postings()
            postings.add(slot, tf)

    def remove(self, slot: int) -> None:
        if slot < len(self._alive) and self._alive[slot]:
            self._alive[slot] = False
            self._total_length -= float(self._lengths[slot])
            self._docs -= 1

    def idf(self, term: str) -> float:
        postings = self._postings.get(term)
        df = 0 if postings is None else int(self._alive[postings.slots[: postings.count]].sum())
        return _idf(self._docs, df)

    def match(self, query: str, size: int) -> LexicalMatch:
        """BM25 score of every slot below ``size`` (0 without a query term, or dead), with
        what ``LexicalMatch.coverage`` needs. Touches only the query terms' postings."""
        out = np.zeros(size, dtype=np.float32)
        found: list[tuple[float, npt.NDArray[np.int32]]] = []
        total_idf = 0.0
        average = max(self._total_length / self._docs, 1.0) if self._docs else 1.0
        for term, query_tf in Counter(terms(query)).items():
            postings = self._postings.get(term)
            if postings is None:
                total_idf += _idf(self._docs, 0)
                continue
            slots = postings.slots[: postings.count]
            alive = self._alive[slots]
            slots = slots[alive]
            idf = _idf(self._docs, len(slots))
            total_idf += idf
            if len(slots) == 0:
                continue
            found.append((idf, slots))
            slots_below = slots[slots < size] if slots[-1] >= size else slots
            tfs = postings.tfs[: postings.count][alive][: len(slots_below)]
            norm = K1 * (1.0 - B + B * self._lengths[slots_below] / average)
            # A slot appears once in a term's postings, so plain fancy-index addition is
            # exact (and many times faster than np.add.at).
            out[slots_below] += idf * tfs * (K1 + 1.0) / (tfs + norm) * query_tf
        return LexicalMatch(out, found, total_idf)

    def scores(self, query: str, size: int) -> npt.NDArray[np.float32]:
        """BM25 score of every slot (0 for slots without a query term or dead)."""
        return self.match(query, size).scores

    def coverage(self, query: str, slot: int) -> float:
        """The share of the query's idf mass that the document in ``slot`` contains (0-1)."""
        return self.match(query, max(slot + 1, 0)).coverage(slot)


def _idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


class LexicalMatch:
    """One query's BM25 scores, and per matched term its idf and (ascending) slots."""

    __slots__ = ("_found", "_total_idf", "scores")

    def __init__(
        self,
        scores: npt.NDArray[np.float32],
        found: list[tuple[float, npt.NDArray[np.int32]]],
        total_idf: float,
    ) -> None:
        self.scores = scores
        self._found = found
        self._total_idf = total_idf

    def coverage(self, slot: int) -> float:
        """The share of the query's idf mass that the document in ``slot`` contains (0-1).

        How well the best lexical match covers the task: a long, chatty task whose best
        match shares only a word or two is weak lexical evidence, whatever its BM25 score.
        Postings are in slot order, so membership is a binary search.
        """
        if self._total_idf <= 0:
            return 0.0
        hit = 0.0
        for idf, slots in self._found:
            at = int(np.searchsorted(slots, slot))
            if at < len(slots) and slots[at] == slot:
                hit += idf
        return hit / self._total_idf
