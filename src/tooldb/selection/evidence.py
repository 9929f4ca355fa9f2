"""Learning from use: the tasks each tool served (or failed), and what they say about a new task.

Every task a tool served is kept, embedded, as evidence for that tool (per tenant, in the
store: ``task_evidence``). A selection looks at the ``neighbours`` stored tasks most
similar to its own; those at least ``min_cosine`` alike vote for the tools that served
them (against, for failures), each by its closeness. The vote moves a tool's blended
relevance by up to ``weight`` z units, scaled by how much close evidence there is
(``confidence``): with none (a new catalogue) nothing moves, and ranking is exactly the
zero-shot one. The tenant's evidence is a matrix in memory, like the tools' vectors:
searched exactly (one matrix-vector product) up to ``ann_min`` stored tasks, past it
through an HNSW graph (ann.py, the tools' one) whose candidates are rescored exactly. This
process's writes update both in place; another process's (and a forget or prune) are
caught up within ``CHECK_INTERVAL_S``: the rows' counts are compared, only new rows'
vectors are read and appended to the graph, and removed rows leave its filter.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..stores import EvidenceRow, EvidenceWrite, Store
from . import ann
from .graph_cache import GraphCache

Floats = npt.NDArray[np.float32]

#: How often (seconds) a selection checks the store for another process's evidence writes.
CHECK_INTERVAL_S = 1.0
#: Longest task text kept as evidence (what explanations quote).
MAX_TASK_CHARS = 2_000
#: Past the graph threshold, the graph proposes this many times the neighbours wanted (at
#: least ``CANDIDATES_MIN``) and the exact cosines choose among them.
CANDIDATE_FACTOR = 4
CANDIDATES_MIN = 128
#: The graph's efConstruction: faiss's default, a third of the tools' 128. Evidence grows
#: by every learned task and a graph is built once per process (or compaction); the
#: candidates are rescored exactly and only the ``neighbours`` nearest vote, so the
#: cheaper graph is enough (bench/learning.py compares the rankings with exact search).
EXPANSION_ADD = 40
#: Reload compacted (and rebuild the graph) when this share of the rows is dead.
COMPACT_DEAD_FRACTION = 0.3


@dataclass(frozen=True)
class EvidenceWeights:
    """How evidence ranks (settings ``select_evidence_*``; docs/selection.md)."""

    weight: float = 16.0
    min_cosine: float = 0.5
    neighbours: int = 32
    merge_cosine: float = 0.95
    cap_per_tool: int = 1000
    #: Closeness is raised to this power (2: a barely similar task counts for little).
    closeness_power: float = 1.0
    #: The mass at which confidence is one half.
    prior_mass: float = 1.0


class Learned(NamedTuple):
    """What the evidence near a task says about one tool."""

    boost: float  # z units added to its blended relevance
    served: float  # successes among the similar tasks
    failed: float  # failures among them
    closest: float  # cosine of the most similar one
    example: str  # its text

    def explain(self) -> str:
        counts = []
        if self.served:
            counts.append(f"served {_count(self.served)}")
        if self.failed:
            counts.append(f"failed {_count(self.failed)}")
        total = self.served + self.failed
        noun = "similar task" if total == 1 else "similar tasks"
        example = self.example if len(self.example) <= 80 else self.example[:77] + "..."
        return f"{', '.join(counts)} {noun} (closest {self.closest:.2f}: {example!r})"


def _count(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


class EvidenceIndex:
    """One tenant's evidence under one embedder, in memory (arrays indexed by row)."""

    def __init__(
        self, store: Store, tenant: str, embedder_id: str, dim: int, ann_min: int | None = None
    ) -> None:
        self.store, self.tenant, self.embedder_id, self.dim = store, tenant, embedder_id, dim
        #: Stored tasks past which the search goes through the HNSW graph (None: exact).
        self.ann_min = ann_min
        self.lock = threading.RLock()
        self.version = -1
        self._checked = 0.0
        self._cache = self._graph_cache()
        self._load([])

    def _graph_cache(self) -> GraphCache | None:
        url = getattr(self.store, "url", None)
        if self.ann_min is None or not isinstance(url, str):
            return None
        # the tools' graphs are keyed by tenant: a suffix no tenant name has keeps them apart
        return GraphCache.for_index(
            url, f"{self.tenant}\0evidence", self.embedder_id, self.fingerprint
        )

    def fingerprint(self, slots: int) -> str:
        """What the first ``slots`` rows are (ids and creation times: an id SQLite reuses
        after a delete is another row)."""
        pairs = np.array([self.ids[:slots], self.created[:slots]], dtype=np.float64)
        return hashlib.sha256(pairs.tobytes()).hexdigest()

    # -- state -----------------------------------------------------------------
    def _load(self, rows: list[EvidenceRow]) -> None:
        capacity = max(16, len(rows))
        self.matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        self.good = np.zeros(capacity, dtype=np.float32)
        self.bad = np.zeros(capacity, dtype=np.float32)
        self.seen = np.zeros(capacity, dtype=np.float64)
        self.created = np.zeros(capacity, dtype=np.float64)
        self.live = np.zeros(capacity, dtype=bool)
        self.ids: list[int] = []
        self.tools: list[str] = []
        self.tasks: list[str] = []
        self.rows_of: dict[str, list[int]] = {}
        self.position: dict[int, int] = {}
        self.dead = 0
        self._graph: ann.HnswIndex | None = None
        self._filter: ann.GraphFilter | None = None
        self.count = 0
        for row in rows:
            self._append(row, row.vector)
        self._sync_graph()

    def _append(self, row: EvidenceRow, data: bytes | None) -> None:
        """A stored row at the next slot (skipped if its vector is not this embedder's size)."""
        vector = np.frombuffer(data or b"", dtype=np.float32)
        if vector.shape != (self.dim,):
            return
        self._grow(self.count + 1)
        at = self.count
        self.matrix[at] = vector
        self.good[at], self.bad[at], self.seen[at] = row.good, row.bad, row.last_seen
        self.created[at], self.live[at] = row.created_at, True
        self.ids.append(row.id)
        self.tools.append(row.tool)
        self.tasks.append(row.task)
        self.rows_of.setdefault(row.tool, []).append(at)
        self.position[row.id] = at
        self.count += 1

    def _grow(self, size: int) -> None:
        if size <= len(self.good):
            return
        capacity = max(size, 2 * len(self.good))
        matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        matrix[: self.count] = self.matrix[: self.count]
        self.matrix = matrix
        for name in ("good", "bad", "seen", "created", "live"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)

    @property
    def alive(self) -> int:
        return self.count - self.dead

    def refresh(self, *, force: bool = False) -> int:
        """Bring the rows up to the store's evidence (at most once per
        ``CHECK_INTERVAL_S`` unless forced); returns the version they are as of."""
        now = time.monotonic()
        if not force and now - self._checked < CHECK_INTERVAL_S and self.version >= 0:
            return self.version
        with self.lock:
            self._checked = now
            if self.store.evidence_version(self.tenant) != self.version:
                self._catch_up()
            return self.version

    def _catch_up(self) -> None:
        """Read the store's rows: the first time (or to compact) all of them with their
        vectors; then only their counts, the vectors of rows not held yet (appended, to
        the graph too) and which held rows are gone (killed: out of the graph's filter)."""
        if self.version < 0 or self.dead > COMPACT_DEAD_FRACTION * max(self.count, 1000):
            version, rows = self.store.evidence_rows(self.tenant, self.embedder_id)
            self._load(rows)
            self.version = version
            return
        version, rows = self.store.evidence_rows(self.tenant, self.embedder_id, vectors=False)
        held, fresh = set(), []
        for row in rows:
            at = self.position.get(row.id)
            if at is not None and self.tools[at] == row.tool and self.created[at] == row.created_at:
                self.good[at], self.bad[at], self.seen[at] = row.good, row.bad, row.last_seen
                held.add(row.id)
            else:
                fresh.append(row)
        for row_id in [row_id for row_id in self.position if row_id not in held]:
            self._kill(row_id)
        if fresh:
            vectors = self.store.evidence_vectors(self.tenant, [row.id for row in fresh])
            for row in fresh:
                self._append(row, vectors.get(row.id))
        self.version = version
        if self.dead > COMPACT_DEAD_FRACTION * max(self.count, 1000):
            self.version = -1  # many dead rows: reload compacted
            self._catch_up()
            return
        self._sync_graph()

    def _sync_graph(self) -> None:
        """Past ``ann_min`` live rows (with faiss), give every slot a place in the graph:
        load a saved one covering the first slots (or build it), then append the rest."""
        if self._graph is None:
            if self.ann_min is None or self.alive < self.ann_min or not ann.available():
                return
            found = self._cache.load(self.dim) if self._cache is not None else None
            reused = found is not None and found[1] <= self.count
            graph = found[0] if found is not None and reused else None
            self._graph = graph if graph is not None else ann.HnswIndex(self.dim, EXPANSION_ADD)
            self._extend_graph()
            if self._cache is not None:
                self._cache.save(self._graph, force=not reused)
            return
        self._extend_graph()
        if self._cache is not None:
            self._cache.save(self._graph)

    def _extend_graph(self) -> None:
        assert self._graph is not None
        if len(self._graph) < self.count:
            self._graph.append(self.matrix[len(self._graph) : self.count])
            self._filter = None

    @property
    def approximate(self) -> bool:
        """Searched through the HNSW graph rather than exactly."""
        return self._graph is not None

    def _nearest(self, query: Floats, wanted: int) -> tuple[Any, Floats]:
        """The ``wanted`` live rows most similar to ``query`` and their cosines (ties: the
        older row first, so both searches choose alike)."""
        count = self.count
        if self._graph is None:
            similarity = self.matrix[:count] @ query
            if count > wanted:
                floor = similarity[np.argpartition(-similarity, wanted - 1)[wanted - 1]]
                found = np.flatnonzero(similarity >= floor)  # with every tie at the cut
            else:
                found = np.arange(count)
        else:
            if self._filter is None:
                self._filter = self._graph.filter(self.live[:count])
            asked = max(CANDIDATES_MIN, CANDIDATE_FACTOR * wanted)
            found = np.sort(self._graph.nearest(query, asked, self._filter))
        # exact cosines of the candidates (the graph's 8-bit copy only proposes them)
        similarity = self.matrix[found] @ query
        keep = np.lexsort((found, -similarity))[:wanted]
        return found[keep], similarity[keep]

    # -- ranking ---------------------------------------------------------------
    def learned(self, query: Floats, weights: EvidenceWeights) -> dict[str, Learned]:
        """What the stored tasks most similar to ``query`` say, by tool (those with a say)."""
        with self.lock:
            if not self.count or self.alive <= 0 or weights.weight == 0:
                return {}
            near, similarity = self._nearest(query, min(weights.neighbours, self.count))
            floor = max(weights.min_cosine, 1e-6)
            kept = similarity >= floor
            near, similarity = near[kept], similarity[kept]
            if not len(near):
                return {}
            good, bad = self.good[near], self.bad[near]
            tools = [self.tools[row] for row in near.tolist()]
            tasks = self.tasks
        closeness = ((similarity - floor) / (1.0 - floor)) ** weights.closeness_power
        seen = np.maximum(good + bad, 1.0)
        mass = closeness * (1.0 + np.log(seen))  # a task seen again counts more, not linearly
        net = (good - bad) / seen
        total = float(mass.sum())
        if total <= 0:
            return {}
        confidence = total / (total + weights.prior_mass)  # nothing close: 0; much: ~1
        votes: dict[str, list[int]] = {}
        for i, tool in enumerate(tools):
            votes.setdefault(tool, []).append(i)
        found = {}
        for tool, members in votes.items():
            vote = float((mass[members] * net[members]).sum()) / total
            best = members[int(np.argmax(similarity[members]))]
            found[tool] = Learned(
                boost=weights.weight * confidence * vote,
                served=float(good[members].sum()),
                failed=float(bad[members].sum()),
                closest=float(similarity[best]),
                example=tasks[int(near[best])],
            )
        return found

    # -- learning --------------------------------------------------------------
    def plan(
        self, tool: str, task: str, vector: Floats, good: float, bad: float,
        weights: EvidenceWeights, now: float,
    ) -> EvidenceWrite:  # fmt: skip
        """The write that records one outcome: merged into the tool's most similar stored
        task if at least ``merge_cosine`` alike, else a new row (evicting the tool's
        least recently seen one past ``cap_per_tool``)."""
        rows = self.rows_of.get(tool, [])
        if rows:
            similarity = self.matrix[rows] @ vector
            best = int(np.argmax(similarity))
            if float(similarity[best]) >= weights.merge_cosine:
                return EvidenceWrite(merges=[(self.ids[rows[best]], good, bad, now)])
        evicted: list[int] = []
        over = len(rows) + 1 - max(weights.cap_per_tool, 1)
        if over > 0:
            oldest = sorted(rows, key=lambda at: float(self.seen[at]))[:over]
            evicted = [self.ids[at] for at in oldest]
        row = {
            "tool": tool, "task": task[:MAX_TASK_CHARS], "embedder": self.embedder_id,
            "vector": np.asarray(vector, dtype=np.float32).tobytes(), "good": good, "bad": bad,
            "created_at": now, "last_seen": now,
        }  # fmt: skip
        return EvidenceWrite(inserts=[row], deletes=evicted)

    def apply(self, write: EvidenceWrite, version: int, ids: list[int]) -> None:
        """Bring the rows (and graph) up to a write of this process (version: the store's
        after it). If another process wrote in between, catch up with the store instead."""
        if version != self.version + 1:
            self.refresh(force=True)
            return
        for row_id, good, bad, seen in write.merges:
            at = self.position.get(row_id)
            if at is not None:
                self.good[at] += good
                self.bad[at] += bad
                self.seen[at] = seen
        for row_id in write.deletes:
            self._kill(row_id)
        for values, row_id in zip(write.inserts, ids, strict=True):
            row = EvidenceRow(
                id=row_id, tool=values["tool"], task=values["task"], good=values["good"],
                bad=values["bad"], created_at=values["created_at"],
                last_seen=values["last_seen"], embedder=values["embedder"],
            )  # fmt: skip
            self._append(row, values["vector"])
        self.version = version
        if self.dead > COMPACT_DEAD_FRACTION * max(self.count, 1000):
            self.version = -1  # many dead rows: reload compacted
            self.refresh(force=True)
            return
        self._sync_graph()

    def _kill(self, row_id: int) -> None:
        at = self.position.pop(row_id, None)
        if at is None:
            return
        self.matrix[at] = 0.0  # never similar to anything: out of every vote
        self.good[at] = self.bad[at] = 0.0
        self.live[at] = False  # and out of the graph's walk
        self._filter = None
        self.rows_of[self.tools[at]].remove(at)
        self.dead += 1
