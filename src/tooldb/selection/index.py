"""A tenant's tools mirrored in memory for selection, kept current from the store.

Each ``refresh`` reads one row (the tenant's generation). When it moved, only the
tools changed since are reloaded; a removal reads the tenant's tool ids and kills
the slots of those gone; too many dead slots trigger a full reload. A changed tool
gets a fresh slot (its old one dies) so the lexical postings never need rewriting.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..stores import IndexRow, Store, TenantState
from .dense_moments import DenseMoments
from .graph_cache import GraphCache
from .lexical import BM25Index
from .native_memory import release_freed_memory
from .vectors import DenseIndex

COMPACT_DEAD_FRACTION = 0.3

#: A load of at least this many tools hands the heap's freed pages back afterwards.
RELEASE_AFTER_ROWS = 5_000

SlotArray = npt.NDArray[np.int64]


class Codes:
    """Small ints for repeated labels (categories, kinds): a filter is one array compare."""

    def __init__(self) -> None:
        self.code_of: dict[str, int] = {}
        self.labels: list[str] = []

    def code(self, label: str) -> int:
        found = self.code_of.get(label)
        if found is None:
            found = self.code_of[label] = len(self.labels)
            self.labels.append(label)
        return found


@dataclass
class Slots:
    """Per-slot facts, parallel arrays and lists indexed by slot (``count`` in use)."""

    count: int = 0
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: _empty(np.int64))
    #: The tool's change_seq when loaded: with the id, what a saved graph is checked by.
    seqs: npt.NDArray[np.int64] = field(default_factory=lambda: _empty(np.int64))
    names: list[str] = field(default_factory=list)
    #: The first 500 characters of each tool's description (what a Candidate shows).
    descriptions: list[str] = field(default_factory=list)
    categories: Codes = field(default_factory=Codes)
    kinds: Codes = field(default_factory=Codes)
    category_codes: npt.NDArray[np.int32] = field(default_factory=lambda: _empty(np.int32))
    kind_codes: npt.NDArray[np.int32] = field(default_factory=lambda: _empty(np.int32))
    usable: npt.NDArray[np.bool_] = field(default_factory=lambda: _empty(np.bool_))
    #: The tool has a vector, but from another embedder (it needs re-embedding).
    foreign: npt.NDArray[np.bool_] = field(default_factory=lambda: _empty(np.bool_))

    def grow(self, size: int) -> None:
        if size > len(self.usable):
            capacity = max(size, len(self.usable) * 2, 16)
            self.ids = _grown(self.ids, capacity)
            self.seqs = _grown(self.seqs, capacity)
            self.usable = _grown(self.usable, capacity)
            self.foreign = _grown(self.foreign, capacity)
            self.category_codes = _grown(self.category_codes, capacity)
            self.kind_codes = _grown(self.kind_codes, capacity)

    def category(self, slot: int) -> str:
        return self.categories.labels[self.category_codes[slot]]

    def kind(self, slot: int) -> str:
        return self.kinds.labels[self.kind_codes[slot]]


def _empty(dtype: Any) -> Any:
    return np.zeros(0, dtype=dtype)


def _grown(array: Any, capacity: int) -> Any:
    grown = np.zeros(capacity, dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class ToolIndex:
    """Lexical and dense indexes over one tenant's tools, for one embedder."""

    def __init__(
        self,
        store: Store,
        tenant: str,
        embedder_id: str | None,
        dim: int,
        ann_min: int | None = None,
    ) -> None:
        self.store = store
        self.tenant = tenant
        self.embedder_id = embedder_id
        self.dim = dim
        self.ann_min = ann_min
        self.lock = threading.RLock()
        self._seen: TenantState | None = None
        self._reset()

    def _reset(self) -> None:
        self.slots = Slots()
        self.lexical = BM25Index()
        self.dense = DenseIndex(self.dim, self.ann_min, self._graph_cache())
        #: Sums over the enabled tools' vectors (dense_moments.py), made on first use and
        #: then kept: slots enabled and rows killed since, applied when a reload ends.
        self.moments: DenseMoments | None = None
        self._moments_added: set[int] = set()
        self._moments_killed: list[npt.NDArray[np.float32]] = []
        self._derived: dict[str, Any] = {}
        self.slot_of: dict[int, int] = {}
        self.by_name: dict[str, int] = {}
        self.dead = 0

    def _graph_cache(self) -> GraphCache | None:
        url = getattr(self.store, "url", None)
        if self.ann_min is None or self.embedder_id is None or not isinstance(url, str):
            return None
        return GraphCache.for_index(url, self.tenant, self.embedder_id, self.fingerprint)

    def fingerprint(self, slots: int) -> str:
        """What the first ``slots`` slots hold: their tools' ids and change_seqs."""
        pairs = np.array([self.slots.ids[:slots], self.slots.seqs[:slots]], dtype=np.int64)
        return hashlib.sha256(pairs.tobytes()).hexdigest()

    @property
    def size(self) -> int:
        return self.slots.count

    @property
    def seen(self) -> TenantState | None:
        """The tenant's state the mirror was last brought up to (None before the first load)."""
        return self._seen

    def refresh(self, state: TenantState | None = None) -> bool:
        """Bring the mirror up to date (with ``state`` if the caller has just read it);
        True if anything was reloaded."""
        if state is None:
            state = self.store.tenant_state(self.tenant)
        with self.lock:
            if state == self._seen:
                return False
            seen = self._seen
            full = seen is None or self.dead > COMPACT_DEAD_FRACTION * max(self.size, 1000)
            if full:
                self._reset()
            elif seen is not None and state.removals != seen.removals:
                self._drop_removed(set(self.store.tool_ids(self.tenant)))
            since = -1 if full or seen is None else seen.generation
            loaded = 0
            for row in self.store.index_rows(self.tenant, since):
                self._put(row)
                loaded += 1
            self.dense.sync(self.size)
            self.lexical.settle()
            self._settle_moments()
            self._derived = {}
            self._seen = state
            if loaded >= RELEASE_AFTER_ROWS:
                release_freed_memory()
            return True

    def _drop_removed(self, present: set[int]) -> None:
        for tool_id in [tool_id for tool_id in self.slot_of if tool_id not in present]:
            self._kill(self.slot_of.pop(tool_id))

    def _put(self, row: IndexRow) -> None:
        old = self.slot_of.pop(row.id, None)
        if old is not None:
            self._kill(old)
        slot = self.size
        self.slots.grow(slot + 1)
        self.slots.count += 1
        self.slots.ids[slot] = row.id
        self.slots.seqs[slot] = row.change_seq
        self.slots.names.append(row.name)
        self.slots.descriptions.append(row.description)
        self.slots.category_codes[slot] = self.slots.categories.code(row.category)
        self.slots.kind_codes[slot] = self.slots.kinds.code(row.kind)
        self.slots.usable[slot] = row.enabled
        self.slot_of[row.id] = slot
        self.by_name[row.name] = slot
        self.lexical.add(slot, row.text)
        vector = None
        if row.vector is not None and row.embedder == self.embedder_id:
            candidate = np.frombuffer(row.vector, dtype=np.float32)
            vector = candidate if candidate.shape == (self.dim,) else None
        if self.embedder_id is not None:
            self.dense.set(slot, vector)
            if self.moments is not None and row.enabled and vector is not None:
                self._moments_added.add(slot)
        self.slots.foreign[slot] = vector is None and row.vector is not None

    def _kill(self, slot: int) -> None:
        if self.moments is not None and self.slots.usable[slot]:
            if slot in self._moments_added:
                self._moments_added.discard(slot)
            elif slot < len(self.dense.present) and self.dense.present[slot]:
                self._moments_killed.append(self.dense.rows(np.array([slot]))[0].copy())
        self.slots.usable[slot] = False
        if self.by_name.get(self.slots.names[slot]) == slot:
            del self.by_name[self.slots.names[slot]]
        self.lexical.remove(slot)
        if self.embedder_id is not None:
            self.dense.set(slot, None)
        self.dead += 1

    def _settle_moments(self) -> None:
        """Apply the reload's enabled slots and killed rows to the sums (rows read after
        ``dense.sync``: the values a select scores, 16-bit fixed point past the graph threshold)."""
        if self.moments is None:
            return
        if self._moments_added:
            self.moments.add_slots(self.dense, np.array(sorted(self._moments_added)))
        if self._moments_killed:
            self.moments.remove(np.stack(self._moments_killed))
        self._moments_added, self._moments_killed = set(), []

    def dense_moments(
        self, query: npt.NDArray[np.float32], allowed: Allowed
    ) -> tuple[float, float] | None:
        """The query cosine's mean and spread over every allowed tool, exactly, for an
        unfiltered selection (None for a filtered one: it uses the sample)."""
        if allowed.memo is None:
            return None
        with self.lock:
            if self.moments is None:
                self.moments = DenseMoments(self.dim)
                size = self.size
                present = self.dense.present[:size]
                usable = self.slots.usable[: len(present)] & present
                self.moments.add_slots(self.dense, np.flatnonzero(usable))
            return self.moments.mean_and_spread(query, allowed.count)

    def nbytes(self) -> int:
        """Memory held by the dense matrix and graph (the lexical postings are not counted)."""
        return self.dense.nbytes()

    def has_vectors(self) -> bool:
        """Any slot has a vector from this embedder (else the task is not embedded)."""
        return self._derive("vectors", lambda: bool(self.dense.present[: self.size].any()))

    def enabled_count(self) -> int:
        return self._derive("enabled", lambda: int(self.slots.usable[: self.size].sum()))

    def missing_vectors(self) -> tuple[int, int]:
        """(enabled tools without a vector from this embedder, of which from another one)."""
        if self.embedder_id is None:
            return 0, 0
        return self._derive("missing", self._missing_vectors)

    def _missing_vectors(self) -> tuple[int, int]:
        usable = self.slots.usable[: self.size]
        present = self.dense.present[: self.size]
        if len(present) < self.size:  # no vector ever set beyond this point
            present = np.concatenate([present, np.zeros(self.size - len(present), dtype=bool)])
        missing = usable & ~present
        return int(missing.sum()), int((missing & self.slots.foreign[: self.size]).sum())

    def _derive(self, key: str, compute: Callable[[], Any]) -> Any:
        """A fact about the mirror, computed once per reload (not once per selection)."""
        with self.lock:
            if key not in self._derived:
                self._derived[key] = compute()
            return self._derived[key]

    def allowed(
        self,
        *,
        category: str | None = None,
        kind: str | None = None,
        names: list[str] | None = None,
    ) -> Allowed:
        """The slots a selection may return: enabled and matching every filter. Without
        filters the same object serves every selection until the next reload."""
        if category is None and kind is None and names is None:
            return self._derive("unfiltered", lambda: Allowed(self._mask(), reused=True))
        return Allowed(self._mask(category=category, kind=kind, names=names))

    def _mask(
        self,
        *,
        category: str | None = None,
        kind: str | None = None,
        names: list[str] | None = None,
    ) -> npt.NDArray[np.bool_]:
        size = self.size
        mask = self.slots.usable[:size].copy()
        slots = self.slots
        for codes, column, label in (
            (slots.categories, slots.category_codes, category),
            (slots.kinds, slots.kind_codes, kind),
        ):
            if label is not None:
                code = codes.code_of.get(label)
                if code is None:
                    return np.zeros(size, dtype=bool)
                mask &= column[:size] == code
        if names is not None:
            keep = np.zeros(size, dtype=bool)
            chosen = [self.by_name[n] for n in names if n in self.by_name]
            keep[np.asarray(chosen, dtype=np.int64)] = True
            mask &= keep
        return mask

    def sample_scores(
        self, query: npt.NDArray[np.float32], allowed: Allowed, count: int
    ) -> npt.NDArray[np.float32]:
        """Cosines of the query with up to ``count`` allowed tools, evenly spaced over the
        allowed slots: what a filtered selection past the graph threshold estimates the
        dense mean and spread on (an unfiltered one has them exactly: dense_moments.py)."""
        slots = allowed.slots
        if len(slots) > count:
            slots = slots[:: len(slots) // count][:count]
        return self.dense.scores_for(query, slots)


class Allowed:
    """The slots a selection may return. The unfiltered one serves every selection until
    the next reload, and its ``memo`` keeps what is derived from it (the graph's bitmap);
    a filter's is made for one selection (``memo`` None)."""

    __slots__ = ("_slots", "count", "mask", "memo")

    def __init__(self, mask: npt.NDArray[np.bool_], *, reused: bool = False) -> None:
        self.mask = mask
        self.count = int(np.count_nonzero(mask))
        self._slots: SlotArray | None = None
        self.memo: dict[Any, Any] | None = {} if reused else None

    @property
    def slots(self) -> SlotArray:
        if self._slots is None:
            self._slots = np.flatnonzero(self.mask).astype(np.int64)
        return self._slots
