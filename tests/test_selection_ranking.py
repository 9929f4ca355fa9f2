"""Selection's ranking pinned figure by figure (issue 30's mutation testing): relevance
computed by hand from the candidates' own scores, the pool's size, the performance terms
with non-default weights, the learned boost and its explanation, the notes, and the
task's vector. Each test fails on a one-line change that the ranking tests of
test_selection.py let through."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import tooldb
from tooldb import Registry, Settings, UsageError
from tooldb.selection import select as select_module
from tooldb.selection.cache import MAX_TASK_CHARS as REMEMBERED_TASK_CHARS
from tooldb.selection.select import Filters, Ranker, Selector, Weights
from tooldb.stores.search_rows import LiveStats
from tooldb.types import Candidate

from .test_selection import CATALOGUE, _spec


def _z(values: np.ndarray, floor: float) -> np.ndarray:
    """z-scores over the allowed tools, the spread floored as docs/selection.md says."""
    return (values - values.mean()) / max(float(values.std()), floor, 1e-6)


def _by_hand(
    registry: Registry, task: str, candidates: list[Candidate], twins: tuple[str, ...] = ()
) -> np.ndarray:
    """Relevance of every tool (``candidates`` holds them all) from the candidates' dense
    and lexical scores: z-scores (dense spread floored at 0.02, lexical at 5% of the best),
    blended with the lexical share (``select_lexical_share``), halved where the words' best
    match is unrelated by the vectors, near-``twins`` taking the best lexical z among
    them, then ``exp(-(best - fused) / 4)``."""
    lexical = np.array([c.lexical for c in candidates], dtype=np.float64)
    lexical_z = _z(lexical, 0.05 * lexical.max())
    merged = [i for i, c in enumerate(candidates) if c.name in twins]
    if merged:
        lexical_z[merged] = lexical_z[merged].max()
    if candidates[0].dense is None:
        fused = lexical_z
    else:
        dense_z = _z(np.array([c.dense for c in candidates], dtype=np.float64), 0.02)
        weights = registry.settings
        best = int(lexical.argmax()) if lexical.max() > 0 else None
        share = weights.select_lexical_share
        if best is not None and dense_z[best] < weights.select_unrelated_z:
            share *= weights.select_unrelated_share
        fused = (1 - share) * dense_z + share * lexical_z
    return np.exp((fused - fused.max()) / 4)


@pytest.mark.parametrize(
    "task",
    ["weather forecast for Paris", "send an email to my boss about the flights",
     "what will the weather be in Paris tomorrow", "xylophone quokka"],
)  # fmt: skip
@pytest.mark.parametrize("embedder", ["hash", "none"])
def test_relevance_by_hand(store_url: str, task: str, embedder: str) -> None:
    """docs/selection.md step 4, from the scores each candidate reports: the blend at the
    lexical share (a task sharing no word: the vectors alone decide), relevance is 1 for
    the best tool and 1/e four z units below it."""
    settings = Settings(url=store_url, embedder=embedder)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.register([_spec(entry) for entry in CATALOGUE])
        candidates = registry.select(task, k=len(CATALOGUE), record=False).candidates
        assert len(candidates) == len(CATALOGUE)
        expected = _by_hand(registry, task, candidates)
        assert [c.relevance for c in candidates] == pytest.approx(expected.tolist(), abs=2e-6)
        assert [c.final for c in candidates] == [c.relevance for c in candidates]  # never called


def test_a_task_whose_best_words_are_unrelated_leans_on_the_vectors(store_url: str) -> None:
    """The vectors' check of the words' best match (``select_unrelated_*``): with the
    threshold raised above every tool, the share is cut by ``select_unrelated_share``."""
    task = "weather forecast for Paris"
    for unrelated_z, cut in ((5.0, 0.25), (5.0, 1.0), (-5.0, 0.25)):
        settings = Settings(url=store_url, embedder="hash", select_unrelated_z=unrelated_z,
                            select_unrelated_share=cut)  # fmt: skip
        _ranked_as_by_hand(settings, task)


def _ranked_as_by_hand(settings: Settings, task: str) -> list[Candidate]:
    """The catalogue's ranking for ``task`` under ``settings`` (registered on first use of
    the store), checked against ``_by_hand``."""
    assert settings.url is not None
    with tooldb.open(settings.url, settings=settings) as registry:
        if not registry.list():
            registry.register([_spec(entry) for entry in CATALOGUE])
        candidates = registry.select(task, k=len(CATALOGUE), record=False).candidates
        expected = _by_hand(registry, task, candidates)
        assert [c.relevance for c in candidates] == pytest.approx(expected.tolist(), abs=2e-6)
        return candidates


TWINS = [
    {"name": "resize_image", "description": "Resize an image to a width and height."},
    {"name": "resize_picture",
     "description": "Resize an image to a width and a height, keeping the image sharp."},
]  # fmt: skip


def test_near_twins_take_the_best_words_of_the_two(store_url: str) -> None:
    """Near-twins (vectors at least ``select_twin_cosine`` alike: 0.82 for these two under
    the ``hash`` embedder) holding the same words of the task each blend the best lexical
    score of the two, so their vectors order them."""
    settings = Settings(url=store_url, embedder="hash", select_twin_cosine=0.8)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.register([_spec(entry) for entry in CATALOGUE + TWINS])
        for task in ("resize this image", "make the image smaller"):
            candidates = registry.select(task, k=7, record=False).candidates
            relevance = [c.relevance for c in candidates]
            merged = _by_hand(registry, task, candidates, ("resize_image", "resize_picture"))
            assert relevance == pytest.approx(merged.tolist(), abs=2e-6)
            assert relevance != pytest.approx(_by_hand(registry, task, candidates).tolist())


def test_the_lexical_share_setting_moves_the_blend(store_url: str) -> None:
    task = "what will the weather be in Paris tomorrow"
    changes = [{"select_lexical_share": share} for share in (0.0, 0.2, 0.5, 0.8, 1.0)]
    seen = set()
    for change in changes:
        candidates = _ranked_as_by_hand(Settings(url=store_url, embedder="hash", **change), task)
        seen.add(round(candidates[1].relevance, 4))
    assert len(seen) == len(changes)  # each setting moved the ranking's figures


def test_weights_take_every_setting() -> None:
    settings = Settings(
        select_lexical_share=0.33, select_success_weight=0.4,
        select_latency_weight=0.06, select_prior_calls=3.0, select_prior_success=0.7,
        select_latency_ref_ms=250.0, select_twin_cosine=0.9, select_unrelated_z=0.2,
        select_unrelated_share=0.4,
    )  # fmt: skip
    assert Weights.from_settings(settings) == Weights(
        lexical_share=0.33, success=0.4, latency=0.06, prior_calls=3.0, prior_success=0.7,
        latency_ref_ms=250.0, twin_cosine=0.9, unrelated_z=0.2, unrelated_share=0.4,
    )  # fmt: skip


def test_the_ranker_by_hand_with_its_own_weights() -> None:
    weights = Weights(
        lexical_share=0.4, success=0.4, latency=0.1, prior_calls=4.0, prior_success=0.8,
        latency_ref_ms=500.0,
    )  # fmt: skip
    ranker = Ranker(weights)
    assert ranker.fresh == (pytest.approx(0.8), 0.5)
    live = LiveStats(6, 3, 6 * 250.0)  # 6 calls, 3 good, 250 ms on average
    assert ranker.success(live) == pytest.approx((3 + 4 * 0.8) / (6 + 4))
    trust = 6 / (6 + 4)
    assert ranker.latency(live) == pytest.approx(0.5 + trust * (1 / (1 + 250 / 500) - 0.5))
    assert ranker.latency(LiveStats(0, 0, 0.0)) == 0.5 and ranker.latency(None) == 0.5
    assert ranker.bonuses(0.9, 0.75) == pytest.approx((0.4 * (0.9 - 0.8), 0.1 * 0.25))
    assert ranker.final(0.6, 0.9, 0.75) == pytest.approx(0.6 + 0.04 + 0.025)


def test_the_pool_is_the_best_max_50_or_5k_tools(registry: Registry) -> None:
    """docs/selection.md: the best ``max(50, 5k)`` tools form the pool; with fewer
    allowed tools, all of them."""
    registry.register(
        [_spec({"name": f"shelf_tool_{i:02d}",
                "description": f"Stack item number {i} on a warehouse shelf."})
         for i in range(60)]
    )  # fmt: skip
    selector = registry.selector
    pools: list[tuple[int, int]] = []
    original = selector._pool

    def spy(task: str, size: int, *rest: Any) -> Any:
        found = original(task, size, *rest)
        pools.append((size, len(found[0].slots)))
        return found

    selector._pool = spy  # type: ignore[method-assign]
    for k in (1, 10, 11, 12, 60):
        assert len(registry.select("stack an item on a shelf", k=k, record=False).names) == k
    # k = 10 pools 50 like k = 1: the pool of k = 1 is remembered and ranked again
    assert pools == [(50, 50), (55, 55), (60, 60), (300, 60)]
    assert len(registry.select("stack an item", k=1000, record=False).names) == 60


def test_learned_boost_and_evidence_are_reported_as_computed(registry: Registry) -> None:
    registry.register([_spec(entry) for entry in CATALOGUE])
    task = "say it in French"
    for example in ("say hello in French", "say goodbye in French", "say thanks in French"):
        registry.learn(example, "translate_text")
    selection = registry.select(task, k=len(CATALOGUE), record=False)
    selector = registry.selector
    assert selector.evidence is not None
    said = selector.evidence.learned(selector.task_vector(task), selector.evidence_weights)
    learned = said["translate_text"]
    best = selection.candidates[0]
    assert best.name == "translate_text"
    assert best.learned == round(learned.boost, 6) and best.learned > 0
    assert best.evidence == learned.explain()
    assert best.evidence.startswith("served 3 similar tasks (closest ")
    assert all(c.learned == 0 and c.evidence is None for c in selection.candidates[1:])
    # the vector learn() stored is the task's: the same task is its own closest example
    again = registry.select("say hello in French", k=1, record=False).candidates[0]
    assert again.evidence is not None and "(closest 1.00: 'say hello in French')" in again.evidence


def test_scores_are_rounded_to_six_places_and_facts_are_the_tools(registry: Registry) -> None:
    registry.register([_spec(entry) for entry in CATALOGUE])
    for _ in range(2):  # success (2 + 4.5) / 7: more than six places before rounding
        registry.call("send_email", {"to": "a@b.c", "subject": "hi"})
    candidates = registry.select("send the forecast by email", k=5, record=False).candidates
    by_name = {entry["name"]: entry for entry in CATALOGUE}
    for c in candidates:
        for value in (c.final, c.relevance, c.dense, c.lexical, c.success, c.latency):
            assert value is not None and value == round(value, 6)
        assert c.description == by_name[c.name]["description"]
        assert c.category == by_name[c.name]["category"] and c.kind == "python"
        assert c.calls == (2 if c.name == "send_email" else 0)
    assert any(c.final != c.relevance for c in candidates)  # the called tool moved
    # the rounding is visible: some score has more than six places before it
    assert any(len(repr(c.dense).split(".")[-1]) == 6 for c in candidates)


def test_an_empty_selection_still_names_its_embedder_and_notes(store_url: str) -> None:
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="hash")) as registry:
        registry.register([_spec(entry) for entry in CATALOGUE])
        empty = registry.select("weather", k=3, category="no-such-category")
        assert empty.candidates == [] and empty.embedder == "hash:256" and empty.notes == []
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="none")) as registry:
        empty = registry.select("weather", k=0)
        assert empty.candidates == [] and empty.embedder is None
        assert empty.notes == [
            "lexical only: no embedder (install tooldb[local] or set TOOLDB_EMBEDDER)"
        ]


def test_the_notes_on_missing_embeddings_word_for_word(store_url: str) -> None:
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="none")) as registry:
        registry.register([_spec(entry) for entry in CATALOGUE[:3]])
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="hash:64")) as registry:
        assert registry.select("weather", k=1).notes == [
            "3 of 3 tools have no hash:64 embedding yet: they are ranked by words only; "
            "run `tooldb embed`"
        ]
        waiting = registry.select("weather forecast", k=3, record=False).candidates
        assert all(c.dense is None for c in waiting)  # ranked by words only, as it says
        registry.embed()
        registry.register([_spec(CATALOGUE[3])])  # embedded as it is registered
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="hash")) as registry:
        assert registry.select("weather", k=1).notes == [
            "4 of 4 tools have no hash:256 embedding yet (4 embedded by another embedder): "
            "they are ranked by words only; run `tooldb embed`"
        ]


def test_a_category_added_elsewhere_is_found_by_its_filter_at_once(
    registry: Registry,
) -> None:
    registry.register([_spec(entry) for entry in CATALOGUE])
    assert registry.select("tide tables", k=2, category="sea").names == []
    with tooldb.open(registry.settings.url, settings=registry.settings) as other:
        tide = {"name": "tide_tables", "category": "sea",
                "description": "High and low tide times for a harbour."}  # fmt: skip
        other.register([_spec(tide)])
    assert registry.select("tide tables", k=2, category="sea").names == ["tide_tables"]


def test_each_filter_has_its_own_remembered_pool(registry: Registry) -> None:
    registry.register([_spec(entry) for entry in CATALOGUE])
    task = "send the weather forecast by email"
    assert registry.select(task, k=5, names=["send_email"]).names == ["send_email"]
    assert len(registry.select(task, k=5, names=[]).names) == 0
    assert len(registry.select(task, k=5).names) == len(CATALOGUE)
    assert registry.select(task, k=5, kind="python", category="weather").names == [
        "get_weather_forecast"
    ]
    assert registry.select(task, k=5, kind="sql").names == []
    assert Filters(names=["a", "b"]).key() == (None, None, ("a", "b"))
    assert Filters().key() == (None, None, None) != Filters(names=[]).key()
    assert Filters(category="x", kind="python").as_json() == {"category": "x", "kind": "python"}


def test_the_request_is_checked_and_the_task_cut(registry: Registry) -> None:
    registry.register([_spec(entry) for entry in CATALOGUE])
    with pytest.raises(UsageError) as raised:
        registry.select("weather", k=1001)
    assert str(raised.value) == "k must be a whole number from 0 to 1000, got 1001"
    with pytest.raises(UsageError) as raised:
        registry.select(" \n ", k=1)
    assert str(raised.value) == "task must be a non-empty text describing what to do"
    huge = "  " + "forecast " * 20_000
    selection = registry.select(huge, k=1)
    assert selection.task == huge.strip()[:100_000] and len(selection.task) == 100_000


class _SlowListEmbedder:
    """The registry's embedder answering plain lists (as a remote API's client does),
    slowly, counting the texts."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner, self.id, self.dim, self.seconds = inner, inner.id, inner.dim, seconds
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        time.sleep(self.seconds)
        return [list(map(float, row)) for row in self.inner.embed(texts)]


def test_the_task_vector_is_float32_remembered_up_to_its_length_and_timed(
    registry: Registry,
) -> None:
    registry.register([_spec(entry) for entry in CATALOGUE])
    selector = registry.selector
    slow = _SlowListEmbedder(selector.embedder, 0.05)
    selector.embedder = slow
    selection = registry.select("convert dollars to euros", k=2, record=False)
    assert 50 <= selection.duration_ms < 60_000  # the embedding's time is in it
    vector = selector.vectors.get("convert dollars to euros")
    assert vector is not None and vector.dtype == np.float32 and not vector.flags.writeable
    longest = ("convert currency " * REMEMBERED_TASK_CHARS)[:REMEMBERED_TASK_CHARS].strip()
    longest = longest + "x" * (REMEMBERED_TASK_CHARS - len(longest))
    for _ in range(2):
        registry.select(longest, k=1, record=False)
    assert slow.texts.count(longest) == 1  # at the limit: still remembered
    assert selector.task_vector(longest) is selector.vectors.get(longest)


def test_vectors_embedded_elsewhere_count_from_the_next_select(store_url: str) -> None:
    """The mirror learns of the new vectors while it ranks (the tenant's state moved): the
    pool is ranked again with the task embedded, not by words only."""
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="none")) as plain:
        plain.register([_spec(entry) for entry in CATALOGUE])
    hashed = Settings(url=store_url, embedder="hash")
    with tooldb.open(store_url, settings=hashed) as registry:
        before = registry.select("weather forecast", k=2, record=False)
        assert [c.dense for c in before.candidates] == [None, None]
        with tooldb.open(store_url, settings=hashed) as other:
            assert other.embed() == len(CATALOGUE)
        after = registry.select("weather forecast", k=2, record=False)
        assert after.notes == [] and all(c.dense is not None for c in after.candidates)


def test_tasks_and_pools_are_remembered_up_to_their_limits(registry: Registry) -> None:
    """A task of up to 2000 characters, with a pool of up to 200 tools (k = 40), is
    pooled once however often it is asked; past either limit, every time."""
    registry.register([_spec(entry) for entry in CATALOGUE])
    selector = registry.selector
    pooled: list[tuple[str, int]] = []
    original = selector._pool

    def spy(task: str, size: int, *rest: Any) -> Any:
        pooled.append((task[:10], size))
        return original(task, size, *rest)

    selector._pool = spy  # type: ignore[method-assign]
    longest = ("convert the currency " * 100)[:REMEMBERED_TASK_CHARS]
    assert len(longest) == REMEMBERED_TASK_CHARS and longest == longest.strip()
    for task, k in ((longest, 1), ("convert", 40), ("convert", 41), (longest + "s", 1)):
        for _ in range(2):
            registry.select(task, k=k, record=False)
    assert pooled == [
        (longest[:10], 50), ("convert", 200), ("convert", 205), ("convert", 205),
        (longest[:10], 50), (longest[:10], 50),
    ]  # fmt: skip


def test_the_graph_serves_only_unfiltered_or_large_selections(
    store_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Past ``select_ann_min_tools`` the pool comes from the graph (approximate_pool),
    but a filtered subset of up to EXACT_SUBSET_MAX tools, and an ``exact`` selector, are
    scored exactly (here with the limit set to 30 instead of 5,000)."""
    pytest.importorskip("faiss")
    monkeypatch.setenv("TOOLDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(select_module, "EXACT_SUBSET_MAX", 30)
    paths: list[str] = []
    for name in ("approximate_pool", "exact_pool"):
        original = getattr(select_module, name)

        def counted(*args: Any, _name: str = name, _original: Any = original) -> Any:
            paths.append(_name)
            return _original(*args)

        monkeypatch.setattr(select_module, name, counted)
    settings = Settings(url=store_url, embedder="hash", select_ann_min_tools=20)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.register(
            [_spec({"name": f"shelf_{i}", "category": ("even", "odd")[i % 2],
                    "description": f"Shelve item {i} in the warehouse."}) for i in range(40)]
        )  # fmt: skip
        task = "shelve an item"
        assert len(registry.select(task, k=3, record=False).names) == 3
        assert registry.selector.index.dense.approximate
        registry.select(task, k=3, category="odd", record=False)  # 20 tools
        registry.select(task, k=3, names=[f"shelf_{i}" for i in range(31)], record=False)
        registry.select(task, k=3, names=[f"shelf_{i}" for i in range(30)], record=False)
        exact = Selector(registry.selector.index, registry.embedder,
                         Weights.from_settings(settings), exact=True)  # fmt: skip
        exact.select(task, 3, Filters())
    assert paths == ["approximate_pool", "exact_pool", "approximate_pool", "exact_pool",
                     "exact_pool"]  # fmt: skip


def test_a_called_tools_figures_are_fresh_on_every_ask_of_a_remembered_pool(
    registry: Registry,
) -> None:
    """A remembered pool keeps the rows of its never-called tools only: a tool's row is
    rebuilt from the statistics on every ask once it has calls, however many asks."""
    registry.register([_spec(entry) for entry in CATALOGUE])
    task = "send an email"
    calls = []
    for made in (2, 3, 1):
        for _ in range(made):
            registry.call("send_email", {"to": "a@b.c", "subject": "hi"})
        best = registry.select(task, k=2, record=False).candidates[0]
        calls.append(best.calls)
    assert calls == [2, 5, 6]


def test_new_evidence_reaches_a_task_asked_again(registry: Registry) -> None:
    """A remembered pool is keyed by the evidence's version: learning moves the next
    ask of the same task, and evidence left by a removed tool is ignored."""
    registry.register([_spec(entry) for entry in CATALOGUE])
    task = "say it in French"
    before = registry.select(task, k=5, record=False).candidates
    assert all(c.learned == 0 for c in before)
    registry.learn("say hello in French", "translate_text")
    after = registry.select(task, k=5, record=False).candidates
    assert next(c for c in after if c.name == "translate_text").learned > 0
    registry.learn("say it in French", "send_email")
    registry.remove("send_email")
    names = registry.select(task, k=5, record=False).names
    assert "send_email" not in names and len(names) == len(CATALOGUE) - 1
