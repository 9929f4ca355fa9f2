"""A task asked again reuses its vector and its pool, and the answer stays what a fresh
selection would give: any change to the tools misses, statistics are read every time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tooldb
from tooldb import Registry
from tooldb.registry.manifests import spec_from_mapping
from tooldb.selection.cache import MAX_TASK_CHARS, Recent
from tooldb.selection.select import Filters

TOOLS = [
    ("resize_image", "media", "Resize an image to a width and height."),
    ("crop_image", "media", "Crop an image to a rectangle."),
    ("convert_currency", "finance", "Convert an amount of money between currencies."),
    ("stock_quote", "finance", "Latest stock price quote for a ticker."),
    ("send_email", "office", "Send an email message to a recipient."),
]


class Counting:
    """The registry's embedder, counting the texts it embeds."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.id, self.dim = inner, inner.id, inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def counted(registry: Registry) -> tuple[Registry, Counting]:
    registry.register(
        [
            spec_from_mapping(
                {"name": name, "category": category, "description": text,
                 "target": "tests.sample_tools:echo"}
            )
            for name, category, text in TOOLS
        ]
    )  # fmt: skip
    selector = registry.selector
    counting = Counting(selector.embedder)
    selector.embedder = counting
    return registry, counting


def _pools(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each pool computed (a remembered one is not)."""
    computed: list[str] = []
    selector = registry.selector
    original = selector._pool
    monkeypatch.setattr(
        selector, "_pool", lambda task, *rest: computed.append(task) or original(task, *rest)
    )
    return computed


def test_a_task_asked_again_is_embedded_and_pooled_once(
    counted: tuple[Registry, Counting], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, counting = counted
    computed = _pools(registry, monkeypatch)
    first = registry.select("make this image smaller", k=3)
    again = registry.select("make this image smaller", k=3)
    assert counting.texts == ["make this image smaller"]
    assert computed == ["make this image smaller"]
    assert again.candidates == first.candidates
    assert again.decision_id != first.decision_id  # every selection is still a decision
    registry.select("make this image smaller", k=3, category="finance")  # another filter
    registry.select("make this image smaller", k=20)  # another pool size
    assert computed == ["make this image smaller"] * 3
    assert counting.texts == ["make this image smaller"]  # the vector serves every pool


def test_a_change_to_any_tool_misses(
    counted: tuple[Registry, Counting], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, _ = counted
    computed = _pools(registry, monkeypatch)
    assert registry.select("resize an image", k=1).names == ["resize_image"]
    with tooldb.open(registry.settings.url, settings=registry.settings) as other:
        other.disable("resize_image")
    assert registry.select("resize an image", k=1).names == ["crop_image"]
    assert len(computed) == 2


def test_statistics_are_fresh_on_a_remembered_pool(
    counted: tuple[Registry, Counting], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, _ = counted
    computed = _pools(registry, monkeypatch)
    registry.register(
        [spec_from_mapping({"name": "resize_image_fast", "category": "media",
                            "description": "Resize an image to a width and height.",
                            "target": "tests.sample_tools:fail"})]
    )  # fmt: skip
    before = registry.select("resize an image to a width", k=2).candidates
    assert {c.calls for c in before} == {0}
    failing = before[0].name
    for _ in range(10):
        registry.call(failing)  # calls change no tool: the pool stays remembered
    after = registry.select("resize an image to a width", k=2).candidates
    assert len(computed) == 1
    assert after[1].name == failing and after[1].calls == 10


def test_long_tasks_given_vectors_and_big_pools_are_not_remembered(
    counted: tuple[Registry, Counting], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, counting = counted
    computed = _pools(registry, monkeypatch)
    long_task = "resize an image " * (MAX_TASK_CHARS // 16 + 1)
    for _ in range(2):
        registry.select(long_task, k=2)
    assert len(counting.texts) == 2 and len(computed) == 2
    vector = counting.inner.embed(["crop"])[0]
    for _ in range(2):
        registry.selector.select("crop", 2, Filters(), query_vector=vector)
    assert len(computed) == 4 and len(counting.texts) == 2
    for _ in range(2):  # a pool past MAX_POOL (k = 50: 250 tools) is not kept either
        registry.select("crop", k=50)
    assert len(computed) == 6 and counting.texts[2:] == ["crop"]  # the vector is kept


def test_a_remembered_vector_cannot_be_changed(counted: tuple[Registry, Counting]) -> None:
    registry, _ = counted
    registry.select("send a message", k=1)
    vector = registry.selector.vectors.get("send a message")
    assert vector is not None and not vector.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        vector[0] = np.float32(1.0)


def test_recent_keeps_the_most_recently_used() -> None:
    recent: Recent[str, int] = Recent(entries=2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert recent.get("a") == 1  # now b is the oldest
    recent.put("c", 3)
    assert (recent.get("a"), recent.get("b"), recent.get("c")) == (1, None, 3)
    assert len(recent) == 2
    nothing: Recent[str, int] = Recent(entries=0)
    nothing.put("a", 1)
    assert nothing.get("a") is None and len(nothing) == 0


def test_ranking_a_ready_order_equals_sorting_the_whole_pool(registry: Registry) -> None:
    """``Selector._rank`` applies the called tools' statistics to the pool's ready order;
    the answer must be the full sort's (final, then relevance, then name), ties included."""
    from tooldb.selection.retrieval import Pool
    from tooldb.selection.select import Pooled, _scaled
    from tooldb.stores.search_rows import LiveStats

    selector = registry.selector
    ranker = selector.ranker
    rng = np.random.default_rng(7)

    class Facts:
        def __init__(self, size: int) -> None:
            self.ids = np.arange(100, 100 + size, dtype=np.int64)
            self.names = [f"tool_{i:03d}" for i in range(size)]

    for trial in range(200):
        size = int(rng.integers(1, 60))
        fused = rng.normal(size=size).astype(np.float32)
        if trial % 3 == 0:  # ties on relevance: names decide
            fused = np.round(fused).astype(np.float32)
        found = Pool(np.arange(size, dtype=np.int64), None, np.zeros(size, np.float32), fused)
        facts = Facts(size)
        pooled = Pooled(found, facts, ranker.bonuses(*ranker.fresh))  # type: ignore[arg-type]
        called = rng.choice(size, size=int(rng.integers(0, min(size, 6) + 1)), replace=False)
        stats = {
            int(facts.ids[i]): LiveStats(int(n), int(rng.integers(0, n + 1)), float(n * 40.0))
            for i in called
            for n in [int(rng.integers(1, 30))]
        }
        k = int(rng.integers(1, size + 2))
        relevance = _scaled(fused).tolist()
        expected = []
        for i in range(size):
            live = stats.get(int(facts.ids[i]))
            final = ranker.final(relevance[i], ranker.success(live), ranker.latency(live))
            expected.append((-final, -float(fused[i]), facts.names[i]))
        ranked = selector._rank(pooled, stats, k)
        assert [r.name for r in ranked] == [key[2] for key in sorted(expected)[:k]]
        for r in ranked:
            live = stats.get(r.id)
            assert r.success == ranker.success(live) and r.latency == ranker.latency(live)


def test_a_full_reload_drops_the_remembered_pools(counted: tuple[Registry, Counting]) -> None:
    """Remembered pools hold the index's facts: after a full reload (the first load, or
    a compaction) they would keep the old ones alive, so they go."""
    registry, _ = counted
    selector = registry.selector
    registry.select("crop a picture", k=2)
    registry.select("send a message", k=2)
    assert len(selector.pools) == 2
    selector.index._seen = None  # what a compaction does: the next refresh loads all anew
    selector.index.refresh()
    assert registry.select("crop a picture", k=2).names[0] == "crop_image"
    assert len(selector.pools) == 1


def test_threads_sharing_remembered_pools_get_the_serial_answers(
    counted: tuple[Registry, Counting],
) -> None:
    """An HTTP server selects from many threads on one registry: remembered vectors,
    pools and candidate rows are shared, and every answer is the one a lone caller gets."""
    from concurrent.futures import ThreadPoolExecutor

    registry, _ = counted
    tasks = ["crop a picture", "send a message", "stock price", "resize an image"]
    expected = {task: registry.select(task, k=3, record=False).candidates for task in tasks}
    registry.selector.pools.clear()
    registry.selector.vectors.clear()

    def work(worker: int) -> list[bool]:
        return [
            registry.select(task, k=3, record=False).candidates == expected[task]
            for _ in range(25)
            for task in tasks[worker % 4 :] + tasks[: worker % 4]
        ]

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = [ok for batch in pool.map(work, range(6)) for ok in batch]
    assert len(answers) == 6 * 25 * 4 and all(answers)
    assert len(registry.selector.pools) == len(tasks)
