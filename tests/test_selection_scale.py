"""Selection past the HNSW threshold: the approximate path agrees with exact scoring,
honours filters, and follows additions, removals and disabled tools without a rebuild."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.registry.manifests import spec_from_mapping
from tooldb.selection import ann
from tooldb.selection.select import Filters, Selector, Weights
from tooldb.types import ToolSpec

pytest.importorskip("faiss")

_VOCABULARY = (
    "weather forecast city rain wind temperature currency convert money rate invoice "
    "email send message subject flight airport search booking hotel room translate text "
    "language document summary image resize crop photo video audio transcribe calendar "
    "meeting schedule reminder stock price market portfolio database query table backup "
    "file upload download archive compress user account password reset ticket issue bug"
)
WORDS = _VOCABULARY.split()
CATEGORIES = ("travel", "finance", "office", "media", "data")
TOOLS = 2_500
ANN_MIN = 1_000


def _tools(count: int, seed: int = 3) -> list[ToolSpec]:
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        words = rng.sample(WORDS, 6)
        specs.append(
            spec_from_mapping(
                {
                    "name": f"{words[0]}_{words[1]}_{i}",
                    "description": " ".join(words) + f" tool number {i}.",
                    "category": CATEGORIES[i % len(CATEGORIES)],
                    "target": "tests.sample_tools:echo",
                }
            )
        )
    return specs


TASKS = [" ".join(random.Random(n).sample(WORDS, 3 + n % 4)) for n in range(40)] + [
    "please find me a cheap hotel room near the airport",
    "turn this invoice into euros",
]


@pytest.fixture
def large(store_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Registry]:
    monkeypatch.setenv("TOOLDB_CACHE_DIR", str(tmp_path / "cache"))  # saved graphs go here
    # Serve unfiltered selections approximately even at this size (the default switch to
    # exact scoring of a filtered subset is 5,000 tools).
    monkeypatch.setattr("tooldb.selection.select.EXACT_SUBSET_MAX", 300)
    settings = Settings(embedder="hash", url=store_url, select_ann_min_tools=ANN_MIN)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.register(_tools(TOOLS))
        yield registry


def _exact(registry: Registry) -> Selector:
    index = registry.selector.index
    return Selector(index, registry.embedder, Weights.from_settings(registry.settings), exact=True)


def test_the_graph_is_built_past_the_threshold_and_agrees_with_exact_scoring(
    large: Registry,
) -> None:
    large.select("warm up", k=1)
    dense = large.selector.index.dense
    assert dense.approximate and dense.method.startswith("hnsw")
    # 16-bit fixed-point vectors plus the graph's 8-bit codes and links
    assert TOOLS * 384 * 2 < large.selector.index.nbytes() < TOOLS * 384 * 4
    exact = _exact(large)
    overlaps, firsts = [], []
    for task in TASKS:
        fast = large.select(task, k=10, record=False)
        slow = exact.select(task, 10, Filters())
        overlaps.append(len(set(fast.names) & set(slow.names)) / 10)
        firsts.append(fast.names[0] == slow.names[0])
        by_name = {c.name: c for c in slow.candidates}
        for candidate in fast.candidates:  # the same tool gets the same raw scores
            if candidate.name in by_name:
                assert candidate.lexical == pytest.approx(by_name[candidate.name].lexical)
                assert candidate.dense == pytest.approx(by_name[candidate.name].dense, abs=2e-3)
    assert np.mean(overlaps) >= 0.9, overlaps
    assert np.mean(firsts) >= 0.9, firsts


def test_filters_past_the_threshold(large: Registry) -> None:
    exact = _exact(large)
    for task in TASKS[:10]:
        found = large.select(task, k=5, category="media", record=False)
        assert found.candidates and {c.category for c in found.candidates} == {"media"}
        # A category is a fifth of the registry: over the exact-subset limit set above,
        # so this went through the graph with the filter applied to what it found.
        assert found.names[0] == exact.select(task, 5, Filters(category="media")).names[0]
    names = [spec.name for spec in _tools(TOOLS)[:40]]
    allowed = large.select(TASKS[0], k=50, names=names, record=False)
    assert set(allowed.names) <= set(names) and len(allowed.names) == 40


def test_additions_removals_and_disabling_need_no_rebuild(large: Registry) -> None:
    large.select("warm up", k=1)
    index = large.selector.index
    dense = index.dense
    task = "quantum teleportation of pangolin spreadsheets"
    large.register(
        [
            spec_from_mapping(
                {
                    "name": "pangolin_teleporter",
                    "description": "Quantum teleportation of pangolin spreadsheets.",
                    "target": "tests.sample_tools:echo",
                }
            )
        ]
    )
    assert large.select(task, k=1).names == ["pangolin_teleporter"]
    victim = large.select("weather forecast city rain", k=1).names[0]
    large.disable(victim)
    assert victim not in large.select("weather forecast city rain", k=20).names
    large.remove("pangolin_teleporter")
    assert "pangolin_teleporter" not in large.select(task, k=20).names
    assert index.dense is dense, "a removal must not rebuild the graph"


def _moments_match_exact_scores(registry: Registry) -> None:
    index = registry.selector.index
    allowed = index.allowed()
    for task in TASKS[:8]:
        query = registry.embedder.embed([task])[0]
        mean, spread = index.dense_moments(query, allowed)
        scores = index.dense.scores_for(query, allowed.slots).astype(np.float64)
        assert mean == pytest.approx(scores.mean(), abs=1e-6)
        assert spread == pytest.approx(scores.std(), rel=1e-4)


def test_the_dense_statistics_are_exact_and_follow_every_change(large: Registry) -> None:
    large.select("warm up", k=1)
    _moments_match_exact_scores(large)
    index = large.selector.index
    moments = index.moments
    assert moments is not None
    fresh = [spec.model_copy(update={"name": f"fresh_{spec.name}"}) for spec in _tools(60, 9)]
    large.register(fresh)
    changed = _tools(TOOLS)[5].model_copy(update={"description": "Pangolin teleportation."})
    large.register([changed])  # a new slot for it, its old one killed
    large.disable(_tools(TOOLS)[7].name)
    large.remove(fresh[0].name)
    large.select("warm up again", k=1)
    assert index.moments is moments, "kept up to date, not made again"
    _moments_match_exact_scores(large)
    # A filtered selection keeps other tools: it estimates on the sample instead.
    assert index.dense_moments(np.ones(index.dim, np.float32), index.allowed(kind="python")) is None


def test_removal_through_another_registry_is_seen(large: Registry) -> None:
    large.select("warm up", k=1)
    url = large.settings.url
    other_settings = replace(large.settings)
    with tooldb.open(url, settings=other_settings) as other:
        gone = other.select("currency convert money rate", k=1).names[0]
        other.remove(gone)
    assert gone not in large.select("currency convert money rate", k=50).names


def _appended(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows appended to any HNSW graph from now on (a rebuild appends every slot)."""
    rows: list[int] = []
    original = ann.HnswIndex.append

    def counting(self: ann.HnswIndex, vectors: np.ndarray) -> None:
        rows.append(len(vectors))
        original(self, vectors)

    monkeypatch.setattr(ann.HnswIndex, "append", counting)
    return rows


def _fresh_select(registry: Registry, task: str) -> list[str]:
    """A select through a new index over the same store: what a new process does."""
    with tooldb.open(registry.settings.url, settings=registry.settings) as other:
        return other.select(task, k=5).names


def test_a_new_process_loads_the_saved_graph(
    large: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = "weather forecast city rain"
    expected = large.select(task, k=5).names  # builds the graph and saves it
    rows = _appended(monkeypatch)
    assert _fresh_select(large, task) == expected
    assert sum(rows) == 0, "the saved graph covers every slot: nothing to add"
    large.register([spec_from_mapping({"name": "late_tool", "description": "rain gauge",
                                       "target": "tests.sample_tools:echo"})])  # fmt: skip
    _fresh_select(large, task)
    assert sum(rows) == 1, "only the tool added since is appended"


def test_a_changed_tool_or_a_damaged_file_means_a_rebuild(
    large: Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    task = "weather forecast city rain"
    large.select(task, k=5)
    first = large.list()[0]
    large.register([first.spec.model_copy(update={"description": "now about volcanoes"})])
    rows = _appended(monkeypatch)
    _fresh_select(large, task)
    assert sum(rows) >= TOOLS, "a changed tool invalidates the saved graph"
    for saved in (tmp_path / "cache" / "graphs").glob("*.hnsw"):
        saved.write_bytes(saved.read_bytes()[:200] + b"garbage")
    rows.clear()
    assert _fresh_select(large, task)
    assert sum(rows) >= TOOLS
