"""The shortcuts selection takes compute bit for bit what the plain numpy calls compute:
rankings must not move by a float's last bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tooldb.selection.retrieval import moments, top_of_many, union
from tooldb.selection.vectors import FIXED_SCALE, from_fixed, to_fixed

finite32 = st.floats(-1e4, 1e4, width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(arrays(np.float32, st.integers(2, 3000), elements=finite32))
def test_moments_are_numpys_mean_and_std(values: np.ndarray) -> None:
    assert moments(values) == (float(values.mean()), float(values.std()))


def test_moments_on_typical_scores() -> None:
    rng = np.random.default_rng(1)
    for size in (2, 3, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 20_000):
        for scale in (1e-3, 1.0, 30.0):
            values = (rng.standard_normal(size) * scale).astype(np.float32)
            assert moments(values) == (float(values.mean()), float(values.std()))


def test_fixed_point_round_trips_unit_vectors_within_half_a_step() -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((200, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[0] = 0.0  # a slot without a vector
    rows[1, :] = 0.0
    rows[1, 5], rows[1, 7] = 1.0, -1.0  # the extremes are representable
    back = from_fixed(to_fixed(rows))
    assert back.dtype == np.float32 and back.shape == rows.shape
    assert float(np.abs(back - rows).max()) <= 0.5 / FIXED_SCALE + 1e-7
    assert not back[0].any() and back[1, 5] == 1.0 and back[1, 7] == -1.0
    cosines, kept = rows @ rows[2], back @ back[2]
    assert float(np.abs(cosines - kept).max()) < 1e-4  # as fine as float16 for ranking
    assert from_fixed(to_fixed(rows[:0])).shape == (0, 384)


def test_fixed_point_clips_what_is_not_a_unit_component() -> None:
    assert to_fixed(np.array([[2.0, -3.0, 0.5]])).tolist() == [[32767, -32767, 16384]]


def test_union_is_union1d() -> None:
    rng = np.random.default_rng(2)
    for _ in range(50):
        a, b = (rng.integers(0, 500, rng.integers(0, 60)).astype(np.int64) for _ in range(2))
        assert np.array_equal(union(a, b), np.union1d(a, b))


def test_top_of_many_keeps_the_best_scores() -> None:
    rng = np.random.default_rng(5)
    for count, size in ((30_000, 100), (6_400, 100), (500, 100), (40_000, 16), (10_000, 15)):
        for ties in (False, True):
            scores = rng.random(count).astype(np.float32)
            if ties:  # BM25 gives many tools the very same score
                scores = np.round(scores * 20).astype(np.float32)
            chosen = top_of_many(scores, size)
            assert len(chosen) == size == len(set(chosen.tolist()))
            cut = np.sort(scores)[-size]
            assert scores[chosen].min() == cut  # exactly the best, whichever of a tie
    skewed = np.zeros(30_000, dtype=np.float32)
    skewed[: 8 * 200 : 8] = np.arange(200, dtype=np.float32) + 1  # all seen by the guess,
    # whose cut then keeps 25 scores: too few, so the whole is partitioned
    assert set(top_of_many(skewed, 100).tolist()) == set(range(8 * 100, 8 * 200, 8))
    # dense BM25 scores: 0 for the tools without a query word, never offered
    for matches in (30, 2_000):
        dense = np.zeros(131_072, dtype=np.float32)
        where = rng.choice(len(dense), matches, replace=False)
        dense[where] = np.round(rng.random(matches) * 20).astype(np.float32) + 1
        chosen = top_of_many(dense, 64)
        assert len(chosen) == min(64, matches) and (dense[chosen] > 0).all()
        assert dense[chosen].min() == np.sort(dense[where])[-min(64, matches)]


def test_allowed_lexical_answers_alike_from_a_sparse_or_a_dense_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long task's match at a large registry keeps dense scores (lexical.SPARSE_BELOW):
    the best tool, the best ``count`` and the statistics' values are those of the sparse
    match, with or without a filter, and a dense top never offers an unmatched tool."""
    import random

    from tooldb.selection import lexical
    from tooldb.selection.index import Allowed
    from tooldb.selection.lexical import BM25Index
    from tooldb.selection.retrieval import AllowedLexical

    rng = random.Random(11)
    common = [f"common{i}" for i in range(20)]
    rare = [f"rare{i}" for i in range(3000)]
    index = BM25Index()
    size = 9000
    for slot in range(size):
        index.add(slot, " ".join(rng.choices(common, k=3) + rng.choices(rare, k=4)))
    every = Allowed(np.ones(size, dtype=bool), reused=True)
    some = Allowed(np.array([slot % 3 != 0 for slot in range(size)]))
    tasks = ["common1 common2 common3 rare5", "rare7 rare8", "common4 rare9 rare10", "zzz"]
    for task in tasks:
        for allowed in (every, some):
            answers = []
            for sparse_below in (0, 10**9):
                monkeypatch.setattr(lexical, "SPARSE_BELOW", sparse_below)
                scores = AllowedLexical.of(index.match(task), allowed, index.documents)
                top = np.sort(scores.top(64))
                spread = scores.spread(allowed.count)
                answers.append((scores.best, top, spread, scores.slots is None))
            (best, top, spread, _), (dense_best, dense_top, dense_spread, dense) = answers
            assert dense == (allowed is every and task != "zzz")
            assert dense_best == best
            expected = index.match(task).dense(size) * allowed.mask
            assert np.array_equal(np.sort(expected[top]), np.sort(expected[dense_top]))
            assert (expected[dense_top] > 0).all() and len(dense_top) == min(
                64, np.count_nonzero(expected)
            )
            assert dense_spread.mean == pytest.approx(spread.mean, rel=1e-5)
            assert dense_spread.spread == pytest.approx(spread.spread, rel=1e-5)


def test_near_twins_are_ordered_by_their_vectors_not_their_words() -> None:
    """Two pooled tools described alike (vectors 0.99 alike) holding the same words of the
    task: each blends the better one's lexical score, so the one closer in meaning ranks
    first; a third tool, and every tool when the setting is off, when one retriever alone
    counts, or when a twin holds a task word the other lacks, keeps its score."""
    from types import SimpleNamespace

    from tooldb.selection.lexical import BM25Index
    from tooldb.selection.retrieval import Pool, Spread, blend, merge_twins
    from tooldb.selection.select import Weights
    from tooldb.settings import Settings

    vectors = np.array([[1.0, 0.0, 0.0], [0.99, 0.141, 0.0], [0.0, 0.0, 1.0]], np.float32)
    index: Any = SimpleNamespace(dense=SimpleNamespace(rows=lambda slots: vectors[slots]))
    words = BM25Index()
    for slot, text in enumerate(["image feature vector", "image feature vector", "weather"]):
        words.add(slot, text)
    words.add(3, "vector search engine model")
    dense = np.array([0.50, 0.60, 0.10], np.float32)  # the twin in slot 1 is closer in meaning
    lexical = np.array([3.0, 1.0, 0.5], np.float32)  # the words prefer slot 0
    lexical_spread, share = Spread(1.0, 0.5), 0.5
    fused = blend(dense, lexical, Spread(0.4, 0.1), lexical_spread, share)
    pool = Pool(np.arange(3), dense, lexical, fused)
    assert fused.argmax() == 0
    matched = words.match("feature vector of an image")
    merged = merge_twins(index, matched, pool, share, lexical_spread, 0.95)
    assert merged.fused.argmax() == 1
    assert merged.fused[1] == pytest.approx(fused[1] + share * (3.0 - 1.0) / 0.5)
    assert merged.fused[0] == fused[0] and merged.fused[2] == fused[2]
    assert np.array_equal(merged.lexical, lexical)  # the raw scores shown stay the tools' own
    given = merge_twins(index, matched, pool, share, lexical_spread, 0.95, vectors)  # rows given
    assert np.array_equal(given.fused, merged.fused)
    for cosine, alone in ((1.0, share), (0.999, share), (0.95, 1.0), (0.95, 0.0)):
        kept = merge_twins(index, matched, pool, alone, lexical_spread, cosine)
        assert np.array_equal(kept.fused, fused)
    named = BM25Index()  # slot 0 holds a word of the task that its twin lacks
    for slot, text in enumerate(["image feature vector mobilenet", "image feature vector"]):
        named.add(slot, text)
    named.add(2, "weather")
    kept = merge_twins(
        index, named.match("mobilenet image features"), pool, share, lexical_spread, 0.95
    )
    assert np.array_equal(kept.fused, fused)
    assert Weights.from_settings(Settings(select_twin_cosine=0.8)).twin_cosine == 0.8


def test_the_vectors_vet_the_words_best_match() -> None:
    from tooldb.selection.retrieval import Mix

    mix = Mix(share=0.6, unrelated_z=0.15, unrelated_share=0.5)
    assert mix.vetted(0.1) == pytest.approx(0.3)  # the vectors see nothing of the task in it
    assert mix.vetted(0.15) == 0.6 and mix.vetted(2.0) == 0.6
    assert mix.vetted(None) == 0.6  # nothing to judge
    for alone in (0.0, 1.0):  # one retriever alone counts: nothing to vet
        assert Mix(share=alone, unrelated_z=0.15, unrelated_share=0.5).vetted(-3.0) == alone
    assert Mix(share=0.6).vetted(-3.0) == 0.6  # the defaults turn the check off


def test_a_word_shared_by_coincidence_weighs_less_in_the_pool() -> None:
    """The task shares one stem ("customer" / "custom") with a tool whose vector is
    unrelated to it: the words' best match. The pool blends with half the share, so the
    tool the vectors favour comes first; with the check off, the coincidence wins."""
    from types import SimpleNamespace

    from tooldb.selection.lexical import BM25Index
    from tooldb.selection.retrieval import Mix, Spread, blend, exact_pool

    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((12, 16)).astype(np.float32)
    query = rng.standard_normal(16).astype(np.float32)
    vectors[1] = query + 0.3 * vectors[1]  # slot 1 means what the task says
    vectors[0] = -query + 0.3 * vectors[0]  # slot 0 means nothing like it
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query /= np.linalg.norm(query)
    words = BM25Index()
    words.add(0, "loads a saved module as a layer of your own custom models")
    words.add(1, "sentiment of opinions in written reviews")
    for slot in range(2, 12):
        words.add(slot, f"weather forecast number {slot} for a city")
    allowed = SimpleNamespace(slots=np.arange(12, dtype=np.int64))
    dense_index = SimpleNamespace(
        approximate=False,
        scores=lambda q, size: vectors[:size] @ q,
        rows=lambda slots: vectors[slots],
    )
    index: Any = SimpleNamespace(size=12, dense=dense_index)
    matched = words.match("what are my customers saying")
    lexical = matched.dense(12)
    assert int(lexical.argmax()) == 0 and lexical[1] == 0  # the words' best: slot 0
    dense = vectors @ query
    dense_spread, lexical_spread = Spread.of(dense, 0.02), Spread.of(lexical, 0.05 * lexical[0])
    assert dense_spread.z(dense[:1])[0] < 0.15
    vetted = exact_pool(index, matched, query, allowed, Mix(0.8, 1.0, 0.15, 0.5), 3)
    expected = blend(dense, lexical, dense_spread, lexical_spread, 0.4)
    assert np.array_equal(vetted.fused, expected[vetted.slots])
    assert int(vetted.slots[vetted.fused.argmax()]) == 1
    unvetted = exact_pool(index, matched, query, allowed, Mix(0.8, 1.0, 0.15, 1.0), 3)
    assert int(unvetted.slots[unvetted.fused.argmax()]) == 0
    vectors[0] = vectors[1]  # now the vectors agree with the words: the share stays
    kept = exact_pool(index, matched, query, allowed, Mix(0.8, 1.0, 0.15, 0.5), 3)
    dense = vectors @ query
    expected = blend(dense, lexical, Spread.of(dense, 0.02), lexical_spread, 0.8)
    assert np.array_equal(kept.fused, expected[kept.slots])


def test_the_vectors_check_is_a_setting() -> None:
    from tooldb import Settings, UsageError
    from tooldb.selection.select import Weights

    weights = Weights.from_settings(Settings(select_unrelated_z=0.5, select_unrelated_share=0.25))
    assert (weights.unrelated_z, weights.unrelated_share) == (0.5, 0.25)
    with pytest.raises(UsageError, match="select_unrelated_share"):
        Settings(select_unrelated_share=1.5)


def test_vectors_that_barely_tell_tools_apart_vet_nothing() -> None:
    """Two near-identical tools: the one the words prefer is below the average of the two
    by the vectors, but only by a hair (their spread at its floor): the share stays."""
    from types import SimpleNamespace

    from tooldb.selection.lexical import BM25Index
    from tooldb.selection.retrieval import MIN_DENSE_SPREAD, Mix, Spread, blend, exact_pool

    vectors = np.array([[1.0, 0.0], [0.9999, 0.0141]], np.float32)
    query = np.array([0.999, 0.0447], np.float32)  # a hair closer to slot 1
    words = BM25Index()
    words.add(0, "resize an image")
    words.add(1, "resize an image to a width and height")
    dense_index = SimpleNamespace(
        approximate=False, scores=lambda q, size: vectors[:size] @ q, rows=lambda s: vectors[s]
    )
    index: Any = SimpleNamespace(size=2, dense=dense_index)
    allowed = SimpleNamespace(slots=np.arange(2, dtype=np.int64))
    matched = words.match("resize the image")
    lexical, dense = matched.dense(2), vectors @ query
    assert lexical.argmax() == 0 and dense.argmax() == 1
    assert Spread.of(dense, MIN_DENSE_SPREAD).spread == MIN_DENSE_SPREAD
    pool = exact_pool(index, matched, query, allowed, Mix(0.8, 1.0, 0.15, 0.5), 2)
    lexical_spread = Spread.of(lexical, 0.05 * float(lexical.max()))
    expected = blend(dense, lexical, Spread.of(dense, MIN_DENSE_SPREAD), lexical_spread, 0.8)
    assert np.array_equal(pool.fused, expected[pool.slots])
