"""Selection: the k tools most likely to do a task, with the reasons.

Relevance: every enabled tool that passes the filters gets a dense score (cosine
of task and tool embeddings) and a BM25 score; each is turned into a z-score
over those tools, so neither dominates by its units, and they are blended with
a lexical share that depends on the task: how much of the task's idf mass the
best lexical match covers (a chatty task whose best match shares one generic
word leans on meaning; a task naming a tool's words leans on words). The best
``POOL`` tools by that blend are ranked, relevance scaled to 0-1 in the pool
(measured choice: bench/select.py, docs/selection.md). Then observed
performance, the seed design's order (closest, then most successful, then
fastest): a success rate smoothed towards a prior (a tool with 2 calls is not
certain; a new tool is not punished) and a latency score, both centred on a
new tool's values so history only moves a tool away from where it started.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from operator import neg
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import TypeAdapter

from ..embedders import Embedder
from ..errors import UsageError
from ..settings import Settings
from ..stores.search_rows import LiveStats
from ..types import Candidate, Selection
from .blas import one_thread
from .cache import MAX_POOL as REMEMBERED_POOL_MAX
from .cache import MAX_TASK_CHARS as REMEMBERED_TASK_CHARS
from .cache import Recent
from .evidence import EvidenceIndex, EvidenceWeights, Learned
from .index import Allowed, Slots, ToolIndex
from .retrieval import (
    EXACT_SUBSET_MAX,
    AllowedLexical,
    Mix,
    Pool,
    approximate_pool,
    exact_pool,
)

MAX_K = 1000
MAX_TASK_CHARS = 100_000
POOL_MIN = 50
POOL_FACTOR = 5


@dataclass(frozen=True)
class Filters:
    category: str | None = None
    kind: str | None = None
    names: list[str] | None = None

    def key(self) -> tuple[Any, ...]:
        """Hashable: what a remembered pool was filtered by."""
        return (self.category, self.kind, tuple(self.names) if self.names is not None else None)

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class Weights:
    lexical_min: float
    lexical_max: float
    coverage_midpoint: float
    coverage_slope: float
    success: float
    latency: float
    prior_calls: float
    prior_success: float
    latency_ref_ms: float
    twin_cosine: float = 1.0
    unrelated_z: float = -math.inf
    unrelated_share: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> Weights:
        return cls(
            lexical_min=settings.select_lexical_weight_min,
            lexical_max=settings.select_lexical_weight_max,
            coverage_midpoint=settings.select_coverage_midpoint,
            coverage_slope=settings.select_coverage_slope,
            success=settings.select_success_weight,
            latency=settings.select_latency_weight,
            prior_calls=settings.select_prior_calls,
            prior_success=settings.select_prior_success,
            latency_ref_ms=settings.select_latency_ref_ms,
            twin_cosine=settings.select_twin_cosine,
            unrelated_z=settings.select_unrelated_z,
            unrelated_share=settings.select_unrelated_share,
        )


def check_request(task: Any, k: Any) -> str:
    if not isinstance(task, str) or not task.strip():
        raise UsageError("task must be a non-empty text describing what to do")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
        raise UsageError(f"k must be a whole number from 0 to {MAX_K}, got {k!r}")
    return task.strip()[:MAX_TASK_CHARS]


#: Relevance is 1 for the best tool and 1/e this many z units below it.
Z_SPAN = 4.0


def _scaled(fused: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Relevance in (0, 1]: 1 for the best tool, decaying with the distance below it in z
    units. Never clipped: a floor would tie every weaker tool and let names order them."""
    # ``fused - best`` is exactly ``-(best - fused)``: rounding to nearest is symmetric
    best = float(np.maximum.reduce(fused))
    return np.exp((fused - best) / Z_SPAN).astype(np.float32, copy=False)


class Ranker:
    """Turns raw dense and lexical scores of a candidate pool into ranked Candidates."""

    def __init__(self, weights: Weights) -> None:
        self.w = weights
        #: A tool never called: its success and latency (the priors).
        self.fresh = (self.success(None), self.latency(None))

    def success(self, stats: LiveStats | None) -> float:
        calls = stats.usage_count if stats else 0
        wins = stats.success_count if stats else 0
        return (wins + self.w.prior_calls * self.w.prior_success) / (calls + self.w.prior_calls)

    def latency(self, stats: LiveStats | None) -> float:
        """1 for instant, 0.5 at the reference latency; a new tool sits at the prior (0.5)
        and moves there from as its calls accumulate."""
        if not stats or not stats.usage_count:
            return 0.5
        average = stats.total_duration_ms / stats.usage_count
        observed = 1.0 / (1.0 + average / self.w.latency_ref_ms)
        trust = stats.usage_count / (stats.usage_count + self.w.prior_calls)
        return 0.5 + trust * (observed - 0.5)

    def lexical_share(self, coverage: float) -> float:
        """A sigmoid of the coverage; a slope of 0 (or under 1e-6) makes it a step. Both
        exponents are kept at or below 0: a steep slope must not overflow ``math.exp``."""
        w = self.w
        x = (coverage - w.coverage_midpoint) / max(w.coverage_slope, 1e-6)
        above, below = math.exp(min(x, 0.0)), math.exp(min(-x, 0.0))
        rise = above / (above + below)  # 1 / (1 + exp(-x))
        return w.lexical_min + (w.lexical_max - w.lexical_min) * rise

    def final(self, relevance: float, success: float, latency: float) -> float:
        plus_success, plus_latency = self.bonuses(success, latency)
        return relevance + plus_success + plus_latency

    def bonuses(self, success: float, latency: float) -> tuple[float, float]:
        """What success and latency add to relevance (in this order) to make ``final``."""
        return self.w.success * (success - self.w.prior_success), self.w.latency * (latency - 0.5)


class Selector:
    """Selection over one tenant's index; shared by every ``select`` of a registry."""

    def __init__(
        self,
        index: ToolIndex,
        embedder: Embedder | None,
        weights: Weights,
        *,
        exact: bool = False,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.ranker = Ranker(weights)
        #: Score every allowed tool even when the index has an HNSW graph (the reference
        #: the approximate path is measured against).
        self.exact = exact
        #: What a task selected again reuses: its vector, its pool (cache.py).
        self.vectors: Recent[str, Any] = Recent()
        self.pools: Recent[tuple[Any, ...], Pooled] = Recent()
        self._fresh_plus = self.ranker.bonuses(*self.ranker.fresh)
        self._pooled_facts: Slots | None = None
        #: Learning from use (evidence.py): the tenant's evidence, None to rank zero-shot.
        self.evidence: EvidenceIndex | None = None
        self.evidence_weights = EvidenceWeights()

    def select(self, task: str, k: int, filters: Filters, query_vector: Any = None) -> Selection:
        started = time.perf_counter()
        index = self.index
        if index.seen is None:
            index.refresh()
        remember = query_vector is None and len(task) <= REMEMBERED_TASK_CHARS
        if query_vector is None and self.embedder is not None and index.has_vectors():
            query_vector = self._embedded(task)  # before the lock: a model takes ms
        evidence = self.evidence.refresh() if self.evidence is not None else None
        while True:
            # Rank on the mirror as it is, then read the statistics together with the
            # tenant's state: if the mirror was behind, bring it up and rank again.
            notes = self._notes()
            with index.lock, one_thread:  # products on one BLAS thread: blas.py
                seen = index.seen
                size = max(POOL_MIN, POOL_FACTOR * k)
                key = self._pool_key(task, k, filters, size, evidence) if remember else None
                pooled = self.pools.get(key) if key is not None else None
                if pooled is None:
                    allowed = index.allowed(
                        category=filters.category, kind=filters.kind, names=filters.names
                    )
                    if k == 0 or not allowed.count:
                        if index.refresh():
                            continue
                        return Selection(
                            task=task, candidates=[], notes=notes, embedder=self._embedder_id()
                        )
                    found, query_vector, learned = self._pool(task, size, allowed, query_vector)
                    # a reload replaces ``index.slots``; the pooled slots' facts stay put
                    pooled = Pooled(found, index.slots, self._fresh_plus, learned)
                    if key is not None:
                        self.pools.put(key, pooled)
                ids = pooled.ids
            stats, state = index.store.pool_stats(index.tenant, ids)  # absent: never called
            if state == seen:
                break
            index.refresh(state)
        return Selection(
            task=task,
            candidates=_candidates(self._rank(pooled, stats, k), pooled, stats),
            notes=notes,
            embedder=self._embedder_id(),
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    def _pool_key(
        self, task: str, k: int, filters: Filters, size: int, evidence: int | None
    ) -> tuple[Any, ...] | None:
        """Where the pool of this request is remembered (index lock held); None if it is
        not kept. Every remembered pool holds the index's current facts: a full reload
        (new facts) drops them all, so none keeps the old ones alive."""
        facts = self.index.slots
        if facts is not self._pooled_facts:
            self.pools.clear()
            self._pooled_facts = facts
        if k == 0 or size > REMEMBERED_POOL_MAX:
            return None
        return (task, filters.key(), size, self.index.seen, evidence)

    def _pool(
        self, task: str, size: int, allowed: Allowed, query_vector: Any
    ) -> tuple[Pool, Any, dict[int, Learned]]:
        """The ``size`` allowed tools of best blended relevance (index lock held), the
        task's vector (None if not needed), embedded once even if the pool is redone, and
        what the evidence says of allowed tools, by slot."""
        index = self.index
        matched = index.lexical.match(task)
        query = None
        if self.embedder is not None and index.has_vectors():
            query = self._embedded(task) if query_vector is None else query_vector
        learned = self._learned(query, allowed)
        lexical = AllowedLexical.of(matched, allowed, index.lexical.documents)
        best = lexical.best
        w = self.ranker.w
        mix = Mix(
            share=self.ranker.lexical_share(matched.coverage(best) if best is not None else 0.0),
            twin_cosine=w.twin_cosine,
            unrelated_z=w.unrelated_z,
            unrelated_share=w.unrelated_share,
            learned={slot: item.boost for slot, item in learned.items()} or None,
        )
        if (
            query is not None
            and index.dense.approximate
            and not self.exact
            and allowed.count > EXACT_SUBSET_MAX
        ):
            pool = approximate_pool(index, matched, lexical, query, allowed, mix, size)
        else:
            pool = exact_pool(index, matched, query, allowed, mix, size)
        return pool, query, learned

    def _learned(self, query: Any, allowed: Allowed) -> dict[int, Learned]:
        """The evidence's say on allowed tools, by slot (none without evidence or vectors)."""
        if self.evidence is None or query is None:
            return {}
        found = {}
        slots, mask = self.index.by_name, allowed.mask
        for tool, item in self.evidence.learned(query, self.evidence_weights).items():
            slot = slots.get(tool)
            if slot is not None and slot < len(mask) and mask[slot]:
                found[slot] = item
        return found

    def _rank(self, pooled: Pooled, stats: dict[int, LiveStats], k: int) -> list[Ranked]:
        """The k best of the pool: final score, then relevance, then name. Plain floats
        until then: only the chosen become objects (a pool can be 500 tools)."""
        ranker = self.ranker
        final = pooled.final
        scored: dict[int, tuple[float, float]] = {}
        moved: dict[int, float] = {}
        for tool_id, live in stats.items():  # the tools with calls: usually a few, or none
            if live.usage_count or live.success_count:
                i = pooled.position[tool_id]
                scored[i] = ranker.success(live), ranker.latency(live)
                moved[i] = ranker.final(final[i][0], *scored[i])
        if moved:  # the never-called keep their order: the k best of them, and the called
            chosen = list(itertools.islice((i for i in pooled.order if i not in moved), k))
            chosen.extend(moved)
            names, fused = pooled.names, pooled.fused
            keys = sorted((-moved.get(i, final[i][1]), -fused[i], names[i], i) for i in chosen)
            chosen = [key[3] for key in keys[:k]]
        else:
            chosen = pooled.order[:k]
        fresh = ranker.fresh
        ids, names = pooled.ids, pooled.names
        return [
            Ranked(
                i, ids[i], names[i], moved.get(i, final[i][1]), final[i][0], *scored.get(i, fresh)
            )
            for i in chosen
        ]

    def task_vector(self, task: str) -> Any:
        """The task's vector (remembered, so a selection of the same task reuses it)."""
        return self._embedded(task)

    def _embedded(self, task: str) -> Any:
        """The task's vector: remembered, or embedded now (and remembered)."""
        assert self.embedder is not None
        if len(task) > REMEMBERED_TASK_CHARS:
            return self.embedder.embed([task])[0]
        vector = self.vectors.get(task)
        if vector is None:
            vector = np.array(self.embedder.embed([task])[0], dtype=np.float32)  # not a view
            vector.flags.writeable = False  # what the next selection of the task will use
            self.vectors.put(task, vector)
        return vector

    def _embedder_id(self) -> str | None:
        return self.embedder.id if self.embedder is not None else None

    def _notes(self) -> list[str]:
        if self.embedder is None:
            return ["lexical only: no embedder (install tooldb[local] or set TOOLDB_EMBEDDER)"]
        missing, foreign = self.index.missing_vectors()
        if not missing:
            return []
        why = f" ({foreign} embedded by another embedder)" if foreign else ""
        return [
            f"{missing} of {self.index.enabled_count()} tools have no {self.embedder.id} "
            f"embedding yet{why}: they are ranked by words only; run `tooldb embed`"
        ]


class Pooled:
    """A pool and the parts of its ranking that only a change to the tools can change:
    the tools' ids, names and relevance, and the order they would rank in if none had
    ever been called. Remembered with the pool (cache.py), so a task asked
    again only applies the statistics of the few called tools to a ready order."""

    __slots__ = (
        "facts", "final", "found", "fused", "ids", "learned", "names", "order", "position", "rows",
    )  # fmt: skip

    def __init__(
        self,
        found: Pool,
        facts: Slots,
        plus: tuple[float, float],
        learned: dict[int, Learned] | None = None,
    ) -> None:
        self.found, self.facts = found, facts
        #: What the evidence said of the pooled tools it had a say on, by slot.
        self.learned = learned or {}
        self.ids: list[int] = facts.ids[found.slots].tolist()
        self.names: list[str] = [facts.names[slot] for slot in found.slots.tolist()]
        self.fused: list[float] = found.fused.tolist()
        relevance = _scaled(found.fused).tolist()
        #: (relevance, final) per tool; one never called (most of a pool) scores its
        #: relevance plus the prior's bonuses, computed once, added as ``Ranker.final`` does.
        plus_success, plus_latency = plus
        self.final = [(value, value + plus_success + plus_latency) for value in relevance]
        # Tuples compare in C (no key function per tool); the position breaks no tie
        # (names are unique) but keeps the sort stable as a key function would.
        keys = zip(
            (-final for _, final in self.final),
            map(neg, self.fused),
            self.names,
            range(len(self.ids)),
            strict=True,
        )
        self.order: list[int] = [key[3] for key in sorted(keys)]
        self.position = {tool_id: i for i, tool_id in enumerate(self.ids)}
        #: Candidate rows of never-called tools, by position, made as they are chosen.
        self.rows: dict[int, dict[str, Any]] = {}


class Ranked(NamedTuple):
    """One pooled tool's place in the ranking (``position`` in the pool's arrays)."""

    position: int
    id: int
    name: str
    final: float
    relevance: float
    success: float
    latency: float


_CANDIDATES: TypeAdapter[list[Candidate]] = TypeAdapter(list[Candidate])


def _candidates(
    chosen: list[Ranked],
    pooled: Pooled,
    stats: dict[int, LiveStats],
) -> list[Candidate]:
    """The chosen tools as Candidates (one validation call). A never-called tool's row
    depends on the pool alone: made once per pool, reused by a task asked again."""
    rows = []
    for rank, tool in enumerate(chosen, start=1):
        called = tool.id in stats
        row = None if called else pooled.rows.get(tool.position)
        if row is None:
            row = _row(tool, pooled, stats)
            if not called:
                pooled.rows[tool.position] = row
        rows.append({**row, "rank": rank})
    return _CANDIDATES.validate_python(rows)


def _row(tool: Ranked, pooled: Pooled, stats: dict[int, LiveStats]) -> dict[str, Any]:
    """A Candidate's fields but its rank, scores rounded to 6 places. Each ``round``
    formats a string (~1 µs): a final equal to the relevance (a new tool) is rounded once."""
    found, facts, position = pooled.found, pooled.facts, tool.position
    slot = int(found.slots[position])
    relevance = round(tool.relevance, 6)
    dense = found.dense
    return {
        "name": tool.name,
        "final": relevance if tool.final == tool.relevance else round(tool.final, 6),
        "relevance": relevance,
        "dense": round(float(dense[position]), 6) if dense is not None else None,
        "lexical": round(float(found.lexical[position]), 6),
        "success": round(tool.success, 6),
        "latency": round(tool.latency, 6),
        "calls": stats[tool.id].usage_count if tool.id in stats else 0,
        "category": facts.category(slot),
        "kind": facts.kind(slot),
        "description": facts.descriptions[slot],
        **_evidence_fields(pooled.learned.get(slot)),
    }


def _evidence_fields(learned: Learned | None) -> dict[str, Any]:
    if learned is None:
        return {}
    return {"learned": round(learned.boost, 6), "evidence": learned.explain()}
