"""A tenant's tools mirrored in memory for selection, kept current from the store.

Each ``refresh`` reads one row (the tenant's generation). When it moved, only the
tools changed since are reloaded; a removal, or too many dead slots, triggers a
full reload. A changed tool gets a fresh slot (its old one dies) so the lexical
postings never need rewriting.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .lexical import BM25Index
from .stores import IndexRow, Store, TenantState
from .vectors import DenseIndex

COMPACT_DEAD_FRACTION = 0.3


@dataclass
class Slots:
    """Per-slot facts, parallel arrays and lists indexed by slot."""

    ids: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    usable: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    #: The tool has a vector, but from another embedder (it needs re-embedding).
    foreign: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def grow(self, size: int) -> None:
        if size > len(self.usable):
            capacity = max(size, len(self.usable) * 2, 16)
            self.usable = _grown(self.usable, capacity)
            self.foreign = _grown(self.foreign, capacity)


def _grown(array: npt.NDArray[np.bool_], capacity: int) -> npt.NDArray[np.bool_]:
    grown = np.zeros(capacity, dtype=bool)
    grown[: len(array)] = array
    return grown


class ToolIndex:
    """Lexical and dense indexes over one tenant's tools, for one embedder."""

    def __init__(self, store: Store, tenant: str, embedder_id: str | None, dim: int) -> None:
        self.store = store
        self.tenant = tenant
        self.embedder_id = embedder_id
        self.dim = dim
        self.lock = threading.RLock()
        self._seen: TenantState | None = None
        self._reset()

    def _reset(self) -> None:
        self.slots = Slots()
        self.lexical = BM25Index()
        self.dense = DenseIndex(self.dim)
        self.slot_of: dict[int, int] = {}
        self.by_name: dict[str, int] = {}
        self.by_category: dict[str, set[int]] = defaultdict(set)
        self.by_kind: dict[str, set[int]] = defaultdict(set)
        self.dead = 0

    @property
    def size(self) -> int:
        return len(self.slots.ids)

    def refresh(self) -> bool:
        """Bring the mirror up to date; True if anything was reloaded."""
        state = self.store.tenant_state(self.tenant)
        with self.lock:
            if state == self._seen:
                return False
            seen = self._seen
            full = seen is None or state.removals != seen.removals
            if self.dead > COMPACT_DEAD_FRACTION * max(self.size, 1000):
                full = True
            since = -1 if full or seen is None else seen.generation
            if full:
                self._reset()
            for row in self.store.index_rows(self.tenant, since):
                self._put(row)
            self._seen = state
            return True

    def _put(self, row: IndexRow) -> None:
        old = self.slot_of.pop(row.id, None)
        if old is not None:
            self._kill(old)
        slot = self.size
        self.slots.grow(slot + 1)
        self.slots.ids.append(row.id)
        self.slots.names.append(row.name)
        self.slots.categories.append(row.category)
        self.slots.kinds.append(row.kind)
        self.slots.usable[slot] = row.enabled
        self.slot_of[row.id] = slot
        self.by_name[row.name] = slot
        self.by_category[row.category].add(slot)
        self.by_kind[row.kind].add(slot)
        self.lexical.add(slot, row.text)
        vector = None
        if row.vector is not None and row.embedder == self.embedder_id:
            candidate = np.frombuffer(row.vector, dtype=np.float32)
            vector = candidate if candidate.shape == (self.dim,) else None
        if self.embedder_id is not None:
            self.dense.set(slot, vector)
        self.slots.foreign[slot] = vector is None and row.vector is not None

    def _kill(self, slot: int) -> None:
        self.slots.usable[slot] = False
        self.by_category[self.slots.categories[slot]].discard(slot)
        self.by_kind[self.slots.kinds[slot]].discard(slot)
        if self.by_name.get(self.slots.names[slot]) == slot:
            del self.by_name[self.slots.names[slot]]
        self.lexical.remove(slot)
        if self.embedder_id is not None:
            self.dense.set(slot, None)
        self.dead += 1

    def nbytes(self) -> int:
        """Memory held by the dense matrix (the lexical postings are not counted)."""
        return self.dense.nbytes()

    def enabled_count(self) -> int:
        return int(self.slots.usable[: self.size].sum())

    def missing_vectors(self) -> tuple[int, int]:
        """(enabled tools without a vector from this embedder, of which from another one)."""
        if self.embedder_id is None:
            return 0, 0
        usable = self.slots.usable[: self.size]
        present = self.dense.present[: self.size]
        if len(present) < self.size:  # no vector ever set beyond this point
            present = np.concatenate([present, np.zeros(self.size - len(present), dtype=bool)])
        missing = usable & ~present
        return int(missing.sum()), int((missing & self.slots.foreign[: self.size]).sum())

    def allowed(
        self,
        *,
        category: str | None = None,
        kind: str | None = None,
        names: list[str] | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Mask of the slots a selection may return: enabled and matching every filter."""
        mask = self.slots.usable[: self.size].copy()
        for chosen in (
            self.by_category.get(category, set()) if category is not None else None,
            self.by_kind.get(kind, set()) if kind is not None else None,
            {self.by_name[n] for n in names if n in self.by_name} if names is not None else None,
        ):
            if chosen is not None:
                keep = np.zeros(self.size, dtype=bool)
                if chosen:
                    keep[np.fromiter(chosen, dtype=np.int64, count=len(chosen))] = True
                mask &= keep
        return mask
