"""Evidence past the graph threshold: the HNSW search finds the neighbours exact search
finds, stays current as evidence is added, merged, forgotten and pruned (by this process
or another), and keeps each tenant's evidence apart."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.registry.manifests import spec_from_mapping
from tooldb.selection import evidence as evidence_module
from tooldb.selection.evidence import EvidenceIndex, EvidenceWeights
from tooldb.stores import EvidenceWrite

TOOLS = [f"tool_{i}" for i in range(12)]
DIM = 64  # the hash embedder's vectors are not used: rows are written with these
ROWS = 600
THRESHOLD = 200
WEIGHTS = EvidenceWeights(neighbours=16, min_cosine=0.3)


def _vectors(rng: np.random.Generator, count: int, centres: np.ndarray) -> np.ndarray:
    """Unit vectors around the tools' centres (tasks of one tool are alike)."""
    picks = rng.integers(len(centres), size=count)
    rows = centres[picks] + rng.normal(0, 0.08, (count, centres.shape[1]))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _rows(vectors: np.ndarray, rng: np.random.Generator, start: int = 0) -> list[dict[str, Any]]:
    now = time.time()
    return [
        {
            "tool": TOOLS[int(rng.integers(len(TOOLS)))],
            "task": f"task {start + i}",
            "embedder": "test",
            "vector": vector.tobytes(),
            "good": 1.0,
            "bad": float(rng.random() < 0.1),
            "created_at": now,
            "last_seen": now,
        }
        for i, vector in enumerate(vectors)
    ]


def _pair(registry: Registry, tenant: str = "default") -> tuple[EvidenceIndex, EvidenceIndex]:
    store = registry.store
    exact = EvidenceIndex(store, tenant, "test", DIM)
    graph = EvidenceIndex(store, tenant, "test", DIM, ann_min=THRESHOLD)
    for index in (exact, graph):
        index.refresh(force=True)
    return exact, graph


def _same(exact: EvidenceIndex, graph: EvidenceIndex, queries: np.ndarray) -> None:
    assert graph.approximate and not exact.approximate
    for query in queries:
        assert graph.learned(query, WEIGHTS) == exact.learned(query, WEIGHTS)


@pytest.fixture
def setup(registry: Registry) -> tuple[Registry, np.random.Generator, np.ndarray]:
    registry.register([
        spec_from_mapping({"name": name, "target": "tests.sample_tools:echo",
                           "description": f"Tool {name}."})
        for name in TOOLS
    ])  # fmt: skip
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(40, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    registry.store.write_evidence(
        registry.tenant, EvidenceWrite(inserts=_rows(_vectors(rng, ROWS, centres), rng))
    )
    return registry, rng, centres


def test_the_graph_finds_the_neighbours_exact_search_finds(setup: Any) -> None:
    registry, rng, centres = setup
    exact, graph = _pair(registry)
    assert graph.count == exact.count == ROWS
    queries = _vectors(rng, 40, centres)
    _same(exact, graph, queries)
    assert any(exact.learned(query, WEIGHTS) for query in queries)  # not a vacuous match


def test_the_graph_stays_current_after_add_merge_forget_and_prune(setup: Any) -> None:
    registry, rng, centres = setup
    store, tenant = registry.store, registry.tenant
    exact, graph = _pair(registry)
    queries = _vectors(rng, 30, centres)
    # this process adds and merges through ``apply`` (what ``learn`` does)
    write = EvidenceWrite(
        inserts=_rows(_vectors(rng, 50, centres), rng, ROWS),
        merges=[(graph.ids[0], 3.0, 0.0, time.time())],
    )
    version, ids = store.write_evidence(tenant, write)
    for index in (exact, graph):
        index.apply(write, version, ids)
    assert graph.count == ROWS + 50 and graph.good[0] == exact.good[0] == 4.0
    _same(exact, graph, queries)
    # another process forgets one tool's rows and prunes: caught up, not rebuilt
    before = graph._graph
    forgotten = registry.forget_evidence(tool=TOOLS[0])
    assert forgotten > 0
    pruned = registry.prune_evidence(max_age_s=0)  # contradicted rows (bad caught up) go
    assert pruned["contradicted"] > 0
    for index in (exact, graph):
        index.refresh(force=True)
    assert graph._graph is before  # the same graph: removed rows left its filter
    assert TOOLS[0] not in {graph.tools[at] for at in graph.position.values()}
    assert graph.alive == exact.alive == store.count_evidence(tenant)
    _same(exact, graph, queries)
    for query in queries:
        assert TOOLS[0] not in graph.learned(query, WEIGHTS)
    # and new rows from another process reach the graph
    more = _rows(_vectors(rng, 30, centres), rng, 2 * ROWS)
    store.write_evidence(tenant, EvidenceWrite(inserts=more))
    for index in (exact, graph):
        index.refresh(force=True)
    assert len(graph._graph) == graph.count and graph._graph is before
    _same(exact, graph, queries)


def test_a_registry_past_the_threshold_ranks_as_an_exact_one(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evidence_module, "CHECK_INTERVAL_S", 0.0)
    catalogue = [
        {"name": name, "target": "tests.sample_tools:echo", "description": f"Tool {name}."}
        for name in TOOLS
    ]
    tasks = [f"{verb} the {thing} {n}" for verb in ("convert", "count", "send", "find")
             for thing in ("file", "mail", "price") for n in range(25)]  # fmt: skip

    def opened(tenant: str, **settings: Any) -> Registry:
        registry = tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url,
                                                            **settings))  # fmt: skip
        return registry.for_tenant(tenant) if tenant != "default" else registry

    with (
        opened("default", select_evidence_ann_min=100) as graph,
        opened("default", select_evidence_ann_min=0) as exact,
    ):
        graph.register([spec_from_mapping(entry) for entry in catalogue])
        for i, task in enumerate(tasks):
            graph.learn(task, TOOLS[i % len(TOOLS)], good=i % 7 != 0)
        other = graph.for_tenant("other")
        other.register([spec_from_mapping(entry) for entry in catalogue])
        other.learn(tasks[0], TOOLS[5])
        for task in ("convert the file 3", "send the mail", "find the price 99", tasks[0]):
            on_graph = graph.select(task, k=5, record=False)
            assert graph.selector.evidence is not None and graph.selector.evidence.approximate
            on_exact = exact.select(task, k=5, record=False)
            assert on_graph.names == on_exact.names
            assert [c.learned for c in on_graph.candidates] == [
                c.learned for c in on_exact.candidates
            ]
            # the other tenant's one row is all it sees: its graph is not this one's
            learned = [c for c in other.select(task, k=12, record=False).candidates if c.learned]
            assert {c.name for c in learned} <= {TOOLS[5]}
        assert other.selector.evidence is not None and not other.selector.evidence.approximate
