"""Learning from use: the tasks each tool served (or failed), and what they say about a new task.

Every task a tool served is kept, embedded, as evidence for that tool (per tenant, in the
store: ``task_evidence``). A selection looks at the ``neighbours`` stored tasks most
similar to its own; those at least ``min_cosine`` alike vote for the tools that served
them (against, for failures), each by its closeness. The vote moves a tool's blended
relevance by up to ``weight`` z units, scaled by how much close evidence there is
(``confidence``): with none (a new catalogue) nothing moves, and ranking is exactly the
zero-shot one. The tenant's evidence is a matrix in memory, like the tools' vectors: one
matrix-vector product per select. This process's writes update it in place; another
process's are seen within ``CHECK_INTERVAL_S`` (one small read, not one per select).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..stores import EvidenceRow, EvidenceWrite, Store

Floats = npt.NDArray[np.float32]

#: How often (seconds) a selection checks the store for another process's evidence writes.
CHECK_INTERVAL_S = 1.0
#: Longest task text kept as evidence (what explanations quote).
MAX_TASK_CHARS = 2_000


@dataclass(frozen=True)
class EvidenceWeights:
    """How evidence ranks (settings ``select_evidence_*``; docs/selection.md)."""

    weight: float = 16.0
    min_cosine: float = 0.5
    neighbours: int = 32
    merge_cosine: float = 0.95
    cap_per_tool: int = 1000


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

    def __init__(self, store: Store, tenant: str, embedder_id: str, dim: int) -> None:
        self.store, self.tenant, self.embedder_id, self.dim = store, tenant, embedder_id, dim
        self.lock = threading.RLock()
        self.version = -1
        self._checked = 0.0
        self._load([])

    # -- state -----------------------------------------------------------------
    def _load(self, rows: list[EvidenceRow]) -> None:
        count = len(rows)
        capacity = max(16, count)
        self.count = count
        self.matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        self.good = np.zeros(capacity, dtype=np.float32)
        self.bad = np.zeros(capacity, dtype=np.float32)
        self.seen = np.zeros(capacity, dtype=np.float64)
        self.ids: list[int] = []
        self.tools: list[str] = []
        self.tasks: list[str] = []
        self.rows_of: dict[str, list[int]] = {}
        self.position: dict[int, int] = {}
        self.dead = 0
        kept = 0
        for row in rows:
            vector = np.frombuffer(row.vector or b"", dtype=np.float32)
            if vector.shape != (self.dim,):
                continue
            self._set(kept, row.id, row.tool, row.task, vector, row.good, row.bad, row.last_seen)
            kept += 1
        self.count = kept

    def _set(
        self, at: int, row_id: int, tool: str, task: str, vector: Any, good: float, bad: float,
        seen: float,
    ) -> None:  # fmt: skip
        self.matrix[at] = vector
        self.good[at], self.bad[at], self.seen[at] = good, bad, seen
        self.ids.append(row_id)
        self.tools.append(tool)
        self.tasks.append(task)
        self.rows_of.setdefault(tool, []).append(at)
        self.position[row_id] = at

    def _grow(self, size: int) -> None:
        if size <= len(self.good):
            return
        capacity = max(size, 2 * len(self.good))
        matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        matrix[: self.count] = self.matrix[: self.count]
        self.matrix = matrix
        for name in ("good", "bad", "seen"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: self.count] = old[: self.count]
            setattr(self, name, new)

    @property
    def alive(self) -> int:
        return self.count - self.dead

    def refresh(self, *, force: bool = False) -> int:
        """Bring the matrix up to the store's evidence (at most once per
        ``CHECK_INTERVAL_S`` unless forced); returns the version it is as of."""
        now = time.monotonic()
        if not force and now - self._checked < CHECK_INTERVAL_S and self.version >= 0:
            return self.version
        with self.lock:
            self._checked = now
            if self.store.evidence_version(self.tenant) != self.version:
                version, rows = self.store.evidence_rows(self.tenant, self.embedder_id)
                self._load(rows)
                self.version = version
            return self.version

    # -- ranking ---------------------------------------------------------------
    def learned(self, query: Floats, weights: EvidenceWeights) -> dict[str, Learned]:
        """What the stored tasks most similar to ``query`` say, by tool (those with a say)."""
        count = self.count
        if not count or self.alive <= 0 or weights.weight == 0:
            return {}
        similarity = self.matrix[:count] @ query
        wanted = min(weights.neighbours, count)
        near = (
            np.argpartition(-similarity, wanted - 1)[:wanted]
            if count > wanted
            else np.arange(count)
        )
        floor = max(weights.min_cosine, 1e-6)
        near = near[similarity[near] >= floor]
        if not len(near):
            return {}
        closeness = (similarity[near] - floor) / (1.0 - floor)
        good, bad = self.good[near], self.bad[near]
        seen = np.maximum(good + bad, 1.0)
        mass = closeness * (1.0 + np.log(seen))  # a task seen again counts more, not linearly
        net = (good - bad) / seen
        total = float(mass.sum())
        if total <= 0:
            return {}
        confidence = total / (total + 1.0)  # one exact match: half; many close ones: ~1
        votes: dict[str, list[int]] = {}
        for i, row in enumerate(near.tolist()):
            votes.setdefault(self.tools[row], []).append(i)
        found = {}
        for tool, members in votes.items():
            vote = float((mass[members] * net[members]).sum()) / total
            best = members[int(np.argmax(similarity[near[members]]))]
            found[tool] = Learned(
                boost=weights.weight * confidence * vote,
                served=float(good[members].sum()),
                failed=float(bad[members].sum()),
                closest=float(similarity[near[best]]),
                example=self.tasks[int(near[best])],
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
        """Bring the matrix up to a write of this process (version: the store's after it).
        If another process wrote in between, reload instead."""
        if version != self.version + 1:
            self.version = -1
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
            self._grow(self.count + 1)
            vector = np.frombuffer(values["vector"], dtype=np.float32)
            self._set(self.count, row_id, values["tool"], values["task"], vector,
                      values["good"], values["bad"], values["last_seen"])  # fmt: skip
            self.count += 1
        self.version = version
        if self.dead > 0.3 * max(self.count, 1000):
            self.version = -1  # many dead rows: reload compacted
            self.refresh(force=True)

    def _kill(self, row_id: int) -> None:
        at = self.position.pop(row_id, None)
        if at is None:
            return
        self.matrix[at] = 0.0  # never similar to anything: out of every vote
        self.good[at] = self.bad[at] = 0.0
        self.rows_of[self.tools[at]].remove(at)
        self.dead += 1
