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
        return math.log(1.0 + (self._docs - df + 0.5) / (df + 0.5))

    def coverage(self, query: str, slot: int) -> float:
        """The share of the query's idf mass that the document in ``slot`` contains (0-1).

        How well the best lexical match covers the task: a long, chatty task whose best
        match shares only a word or two is weak lexical evidence, whatever its BM25 score.
        """
        words = set(terms(query))
        total = sum(self.idf(word) for word in words)
        if total <= 0:
            return 0.0
        found = 0.0
        for word in words:
            postings = self._postings.get(word)
            if postings is not None and slot in postings.slots[: postings.count]:
                found += self.idf(word)
        return found / total

    def scores(self, query: str, size: int) -> npt.NDArray[np.float32]:
        """BM25 score of every slot (0 for slots without a query term or dead)."""
        out = np.zeros(size, dtype=np.float32)
        if self._docs == 0:
            return out
        average = max(self._total_length / self._docs, 1.0)
        for term, query_tf in Counter(terms(query)).items():
            postings = self._postings.get(term)
            if postings is None:
                continue
            slots = postings.slots[: postings.count]
            alive = self._alive[slots]
            slots = slots[alive]
            if len(slots) == 0:
                continue
            tfs = postings.tfs[: postings.count][alive]
            idf = math.log(1.0 + (self._docs - len(slots) + 0.5) / (len(slots) + 0.5))
            norm = K1 * (1.0 - B + B * self._lengths[slots] / average)
            weight = idf * tfs * (K1 + 1.0) / (tfs + norm)
            np.add.at(out, slots[slots < size], (weight * query_tf)[slots < size])
        return out
