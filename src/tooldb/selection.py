"""Selection: the k tools most likely to do a task, with the reasons.

Relevance: every enabled tool that passes the filters gets a dense score (cosine
of task and tool embeddings) and a BM25 score; each is turned into a z-score
over those tools, so neither dominates by its units, and they are blended with
a lexical share that depends on the task: how much of the task's idf mass the
best lexical match covers (a chatty task whose best match shares one generic
word leans on meaning; a task naming a tool's words leans on words). The best
``POOL`` tools by that blend are ranked, relevance scaled to 0-1 in the pool
(measured choice: bench/selection.py, docs/selection.md). Then observed
performance, the seed design's order (closest, then most successful, then
fastest): a success rate smoothed towards a prior (a tool with 2 calls is not
certain; a new tool is not punished) and a latency score, both centred on a
new tool's values so history only moves a tool away from where it started.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .embedders import Embedder
from .errors import UsageError
from .retrieval import EXACT_SUBSET_MAX, approximate_pool, exact_pool
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
    lexical_min: float
    lexical_max: float
    coverage_midpoint: float
    coverage_slope: float
    success: float
    latency: float
    prior_calls: float
    prior_success: float
    latency_ref_ms: float

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
    return np.exp(-(float(fused.max()) - fused) / Z_SPAN).astype(np.float32)


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

    def lexical_share(self, coverage: float) -> float:
        w = self.w
        rise = 1.0 / (
            1.0 + math.exp(-(coverage - w.coverage_midpoint) / max(w.coverage_slope, 1e-6))
        )
        return w.lexical_min + (w.lexical_max - w.lexical_min) * rise

    def final(self, relevance: float, success: float, latency: float) -> float:
        return (
            relevance
            + self.w.success * (success - self.w.prior_success)
            + self.w.latency * (latency - 0.5)
        )


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
            matched = index.lexical.match(task, size)
            query = None
            if self.embedder is not None and index.dense.present[:size].any():
                query = self.embedder.embed([task])[0] if query_vector is None else query_vector
            hits = np.flatnonzero(matched.scores)
            hits = hits[allowed[hits]].astype(np.int64)
            best = int(hits[np.argmax(matched.scores[hits])]) if len(hits) else None
            share = self.ranker.lexical_share(matched.coverage(best) if best is not None else 0.0)
            pool_size = max(POOL_MIN, POOL_FACTOR * k)
            allowed_count = int(np.count_nonzero(allowed))
            if (
                query is not None
                and index.dense.approximate
                and not self.exact
                and allowed_count > EXACT_SUBSET_MAX
            ):
                found = approximate_pool(
                    index, matched.scores, hits, query, allowed, allowed_count, share,
                    pool_size,
                )  # fmt: skip
            else:
                found = exact_pool(index, matched.scores, query, allowed, share, pool_size)
            slots = found.slots
            ids = [index.slots.ids[s] for s in slots]
            meta = [
                (index.slots.names[s], index.slots.category(s), index.slots.kind(s)) for s in slots
            ]
        stats = index.store.live_stats(index.tenant, ids)
        dense, lexical, pooled = found.dense, found.lexical, found.fused
        relevance = _scaled(pooled)
        lives = [stats.get(tool_id) for tool_id in ids]
        success = [self.ranker.success(live) for live in lives]
        latency = [self.ranker.latency(live) for live in lives]
        final = [
            self.ranker.final(float(relevance[i]), success[i], latency[i]) for i in range(len(ids))
        ]
        # Sort on plain numbers; only the k chosen become objects (a pool can be 500 tools).
        order = sorted(range(len(ids)), key=lambda i: (-final[i], -pooled[i], meta[i][0]))
        chosen = [
            Candidate(
                name=meta[i][0],
                rank=rank,
                final=round(final[i], 6),
                relevance=round(float(relevance[i]), 6),
                dense=round(float(dense[i]), 6) if dense is not None else None,
                lexical=round(float(lexical[i]), 6),
                success=round(success[i], 6),
                latency=round(latency[i], 6),
                calls=lives[i].usage_count if lives[i] else 0,  # type: ignore[union-attr]
                category=meta[i][1],
                kind=meta[i][2],
            )
            for rank, i in enumerate(order[:k], start=1)
        ]
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
