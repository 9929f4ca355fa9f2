"""BM25 in its compact form (flat postings, a tail, cached weights, sparse matches) gives
bit for bit the scores of the plain dense computation, through additions and removals."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from tooldb.selection import lexical
from tooldb.selection.documents import terms
from tooldb.selection.lexical import K1, B, BM25Index, query_terms

_VOCABULARY = (
    "weather forecast city rain wind currency convert money rate email send message flight "
    "airport hotel translate text image resize video audio calendar meeting stock price "
    "database query table file upload user account ticket issue bug report search"
)
WORDS = _VOCABULARY.split()


class DenseBM25:
    """The reference: a dense score array per query, one term at a time (the old index)."""

    def __init__(self) -> None:
        self.docs: dict[int, list[str]] = {}
        self.postings: dict[str, list[tuple[int, int]]] = {}

    def add(self, slot: int, text: str) -> None:
        words = terms(text)
        self.docs[slot] = words
        for term, tf in Counter(words).items():
            self.postings.setdefault(term, []).append((slot, tf))

    def remove(self, slot: int) -> None:
        self.docs.pop(slot, None)

    def scores(self, query: str, size: int) -> np.ndarray:
        out = np.zeros(size, dtype=np.float32)
        lengths = np.zeros(size, dtype=np.float32)
        for slot, words in self.docs.items():
            lengths[slot] = len(words)
        docs = len(self.docs)
        average = max(sum(map(len, self.docs.values())) / docs, 1.0) if docs else 1.0
        for term in dict.fromkeys(terms(query)):  # a repeated query word counts once
            alive = [(s, tf) for s, tf in self.postings.get(term, []) if s in self.docs]
            idf = math.log(1.0 + (docs - len(alive) + 0.5) / (len(alive) + 0.5))
            if not alive:
                continue
            slots = np.array([s for s, _ in alive])
            tfs = np.array([tf for _, tf in alive], dtype=np.float32)
            norm = K1 * (1.0 - B + B * lengths[slots] / average)
            out[slots] += idf * tfs * (K1 + 1.0) / (tfs + norm)
        return out


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))


def _queries(rng: random.Random) -> list[str]:
    return [_text(rng) for _ in range(15)] + ["weather weather rain", "nothing matches zzz"]


@pytest.mark.parametrize("sparse_below", [0, 10**9], ids=["sparse", "dense"])
@pytest.mark.parametrize("tail_merge", [4, 64, 1_000_000])
def test_scores_match_the_dense_computation_through_changes(
    tail_merge: int, sparse_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In either form of a match (sparse, or dense over every slot: lexical.SPARSE_BELOW)."""
    monkeypatch.setattr(lexical, "TAIL_MERGE", tail_merge)  # merge often, sometimes, never
    monkeypatch.setattr(lexical, "SPARSE_BELOW", sparse_below)
    rng = random.Random(tail_merge)
    index, reference = BM25Index(), DenseBM25()
    slot = 0
    for round_ in range(6):
        for _ in range(40):
            text = _text(rng)
            index.add(slot, text)
            reference.add(slot, text)
            slot += 1
        for victim in rng.sample(sorted(reference.docs), 5 * round_):
            index.remove(victim)
            reference.remove(victim)
        for query in _queries(rng):
            expected = reference.scores(query, slot)
            matched = index.match(query)
            assert np.array_equal(matched.hits, np.flatnonzero(expected))
            assert np.array_equal(matched.scores, expected[matched.hits])  # bit for bit
            assert np.array_equal(matched.dense(slot), expected)
            probe = np.array([0, slot // 2, slot - 1], dtype=np.int64)
            assert np.array_equal(matched.at(probe), expected[probe])
            beyond = np.array([slot - 1, 10 * slot], dtype=np.int64)  # a slot never added
            assert matched.at(beyond).tolist() == [expected[slot - 1], 0.0]
            assert (matched.dense_scores is not None) == (sparse_below > 0 and expected.any())
            if len(matched.hits):
                best = int(matched.hits[np.argmax(matched.scores)])
                held = matched.words_held(np.array([best], dtype=np.int64))[0]
                contained = [t for t in dict.fromkeys(terms(query)) if t in reference.docs[best]]
                assert int(held.sum()) == len(contained) > 0


def test_repeated_queries_reuse_weights_until_a_change() -> None:
    index = BM25Index()
    for slot, text in enumerate(["rain in the city", "city rain rain", "money rate"]):
        index.add(slot, text)
    first = index.match("city rain")
    assert index.match("city rain").scores.tolist() == first.scores.tolist()
    index.add(3, "a very long document about rain and many other words entirely")
    after = index.match("city rain")  # the average length moved: every weight changes
    assert after.scores[:2].tolist() != first.scores.tolist()
    index.remove(0)
    assert 0 not in index.match("city rain").hits.tolist()


def test_query_terms_are_the_distinct_terms_in_order() -> None:
    for query in ("Get the Weather for Paris, weather!", "x" * 3000, "", "a the of"):
        assert query_terms(query) == tuple(dict.fromkeys(terms(query)))
    assert query_terms("rain, city rain") == ("rain", "citi")


def test_a_repeated_query_word_counts_once() -> None:
    """A task of several steps repeats its generic verbs; they must not outweigh the
    words that say what each step is about."""
    index = BM25Index()
    for slot, text in enumerate(["retrieve weather", "retrieve stock price", "send email"]):
        index.add(slot, text)
    once = index.match("retrieve weather")
    thrice = index.match("retrieve the weather, then retrieve it again and retrieve it")
    assert thrice.hits.tolist() == once.hits.tolist()
    assert thrice.scores.tolist() == once.scores.tolist()


def test_kept_weights_stay_bounded_and_score_as_computed_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Term weights are kept between queries up to CACHED_POSTINGS postings (the oldest
    go first); a query answered from kept weights scores exactly as a fresh index does."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    documents = [" ".join(rng.choices(words, k=12)) for _ in range(400)]
    queries = [" ".join(rng.choices(words, k=6)) for _ in range(60)]
    monkeypatch.setattr(lexical, "CACHED_POSTINGS", 500)
    kept = BM25Index()
    for slot, text in enumerate(documents):
        kept.add(slot, text)
    for query in queries * 2:
        match = kept.match(query)
        fresh = BM25Index()
        for slot, text in enumerate(documents):
            fresh.add(slot, text)
        expected = fresh.match(query)
        assert np.array_equal(match.hits, expected.hits)
        assert np.array_equal(match.scores, expected.scores)
        assert kept._cached <= 500 + max(len(e.slots) for e in kept._cache.values())
        assert kept._cached == sum(len(e.slots) for e in kept._cache.values())
