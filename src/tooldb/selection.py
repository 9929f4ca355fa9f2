"""Selection: the k tools most likely to do a task, with the reasons.

Retrieve: a candidate pool from the dense index (cosine of task and tool
embeddings) and from BM25, each restricted to enabled tools that pass the
filters. Rank: relevance is a weighted sum of the two scores, each scaled by
its best value in the pool, so neither dominates by units. Then observed
performance, the seed design's order (closest, then most successful, then
fastest): a success rate smoothed towards a prior (a tool with 2 calls is not
certain; a new tool is not punished) and a latency score, both centred on a
new tool's values so history only moves a tool away from where it started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .embedders import Embedder
from .errors import UsageError
from .settings import Settings
from .stores.search_rows import LiveStats
from .tool_index import ToolIndex
from .types import Candidate, Selection

MAX_K = 1000
MAX_TASK_CHARS = 100_000
POOL_MIN = 50
POOL_FACTOR = 5


@dataclass(frozen=True)
class Filters:
    category: str | None = None
    kind: str | None = None
    names: list[str] | None = None

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class Weights:
    dense: float
    lexical: float
    success: float
    latency: float
    prior_calls: float
    prior_success: float
    latency_ref_ms: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Weights:
        return cls(
            dense=settings.select_dense_weight,
            lexical=settings.select_lexical_weight,
            success=settings.select_success_weight,
            latency=settings.select_latency_weight,
            prior_calls=settings.select_prior_calls,
            prior_success=settings.select_prior_success,
            latency_ref_ms=settings.select_latency_ref_ms,
        )


def check_request(task: Any, k: Any) -> str:
    if not isinstance(task, str) or not task.strip():
        raise UsageError("task must be a non-empty text describing what to do")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
        raise UsageError(f"k must be a whole number from 0 to {MAX_K}, got {k!r}")
    return task.strip()[:MAX_TASK_CHARS]


def pool(
    scores: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], size: int
) -> npt.NDArray[np.int64]:
    """Slots of the ``size`` best positive scores among the allowed slots."""
    masked = np.where(allowed, scores, -np.inf)
    top = np.argpartition(-masked, size)[:size] if size < len(masked) else np.arange(len(masked))
    return top[np.isfinite(masked[top])].astype(np.int64)


class Ranker:
    """Turns raw dense and lexical scores of a candidate pool into ranked Candidates."""

    def __init__(self, weights: Weights) -> None:
        self.w = weights

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

    def relevance(
        self, dense: npt.NDArray[np.float32] | None, lexical: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        top_lexical = float(lexical.max()) if len(lexical) else 0.0
        lexical_part = lexical / top_lexical if top_lexical > 0 else np.zeros_like(lexical)
        if dense is None:
            return lexical_part.astype(np.float32)
        top_dense = float(dense.max()) if len(dense) else 0.0
        dense_part = np.clip(dense, 0.0, None) / top_dense if top_dense > 0 else dense * 0
        total = self.w.dense + self.w.lexical or 1.0
        return ((self.w.dense * dense_part + self.w.lexical * lexical_part) / total).astype(
            np.float32
        )

    def final(self, relevance: float, success: float, latency: float) -> float:
        return (
            relevance
            + self.w.success * (success - self.w.prior_success)
            + self.w.latency * (latency - 0.5)
        )


class Selector:
    """Selection over one tenant's index; shared by every ``select`` of a registry."""

    def __init__(self, index: ToolIndex, embedder: Embedder | None, weights: Weights) -> None:
        self.index = index
        self.embedder = embedder
        self.ranker = Ranker(weights)

    def select(self, task: str, k: int, filters: Filters, query_vector: Any = None) -> Selection:
        started = time.perf_counter()
        index = self.index
        index.refresh()
        notes = self._notes()
        with index.lock:
            size = index.size
            allowed = index.allowed(
                category=filters.category, kind=filters.kind, names=filters.names
            )
            if k == 0 or not allowed.any():
                return Selection(
                    task=task, candidates=[], notes=notes, embedder=self._embedder_id()
                )
            lexical_all = index.lexical.scores(task, size)
            dense_all = None
            if self.embedder is not None and index.dense.present[:size].any():
                if query_vector is None:
                    query_vector = self.embedder.embed([task])[0]
                dense_all = index.dense.scores(query_vector, size)
            depth = max(POOL_MIN, POOL_FACTOR * k)
            slots = pool(lexical_all, allowed & (lexical_all > 0), depth)
            if dense_all is not None:
                slots = np.union1d(
                    slots, pool(dense_all, allowed & index.dense.present[:size], depth)
                )
            if len(slots) == 0:  # nothing matches at all: any allowed tool, in registry order
                slots = np.flatnonzero(allowed)[:depth]
            ids = [index.slots.ids[s] for s in slots]
            meta = [
                (index.slots.names[s], index.slots.categories[s], index.slots.kinds[s])
                for s in slots
            ]
        stats = index.store.live_stats(index.tenant, ids)
        dense = dense_all[slots] if dense_all is not None else None
        lexical = lexical_all[slots]
        relevance = self.ranker.relevance(dense, lexical)
        candidates = []
        for i, tool_id in enumerate(ids):
            live = stats.get(tool_id)
            success, latency = self.ranker.success(live), self.ranker.latency(live)
            name, category, kind = meta[i]
            candidates.append(
                Candidate(
                    name=name,
                    rank=0,
                    final=round(self.ranker.final(float(relevance[i]), success, latency), 6),
                    relevance=round(float(relevance[i]), 6),
                    dense=round(float(dense[i]), 6) if dense is not None else None,
                    lexical=round(float(lexical[i]), 6),
                    success=round(success, 6),
                    latency=round(latency, 6),
                    calls=live.usage_count if live else 0,
                    category=category,
                    kind=kind,
                )
            )
        candidates.sort(key=lambda c: (-c.final, -c.relevance, c.name))
        chosen = [c.model_copy(update={"rank": r + 1}) for r, c in enumerate(candidates[:k])]
        return Selection(
            task=task,
            candidates=chosen,
            notes=notes,
            embedder=self._embedder_id(),
            duration_ms=(time.perf_counter() - started) * 1000,
        )

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
