"""Dense vectors in process: exact inner-product search, and an HNSW graph at scale.

Below ``ann_min`` vectors, search is exact: a float32 matrix times the query,
0.05 ms at 1,000 vectors and 0.4 ms at 10,000 (one core, 384 dims). Past it, an
HNSW graph (``ann.py``) finds the nearest few hundred and the matrix only rescores
them exactly, so it is kept in 16 bits per component (half the memory): fixed point,
``round(x * 32767)``, since unit vectors' components lie in [-1, 1]. That is as fine as
float16 for the small components of a 384-d unit vector (a step of 3e-5; float16's is
3e-5 at 0.05 and coarser above), and it turns back into float32 by one vectorised
cast: a pool's ~130 rows in ~5 µs, where float16's cast branches on every value (~60
µs even through a lookup table). Vectors are unit length, so the inner product is the
cosine. Slots grow by a quarter (and the matrix is cut to the slots in use when the
graph is built); a removed tool's slot is zeroed and marked dead until the owner
compacts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import ann
from .graph_cache import GraphCache

Floats = npt.NDArray[np.float32]
Slots = npt.NDArray[np.int64]
#: Rescoring a handful of slots from fixed point is cheap; converting a whole large matrix
#: for an exact pass is done in blocks of this many rows to bound the temporary copy.
BLOCK_ROWS = 16_384
EXACT = "exact (numpy inner product)"


#: A fixed-point component's value is its int16 divided by this.
FIXED_SCALE = 32767.0
_FIXED_STEP = np.float32(1.0 / FIXED_SCALE)


def to_fixed(rows: npt.ArrayLike) -> npt.NDArray[np.int16]:
    """Unit-vector components as 16-bit fixed point (clipped to [-1, 1])."""
    values = np.clip(np.asarray(rows, dtype=np.float32), -1.0, 1.0)
    return np.rint(values * np.float32(FIXED_SCALE)).astype(np.int16)


def from_fixed(rows: npt.NDArray[Any]) -> Floats:
    """``to_fixed``'s components as float32 (a vectorised cast and one multiply)."""
    values = rows.astype(np.float32)
    values *= _FIXED_STEP
    return values


def _as_floats(rows: npt.NDArray[np.float32] | npt.NDArray[np.int16]) -> Floats:
    if rows.dtype == np.float32:
        return rows  # type: ignore[return-value]  # narrowed by the dtype
    return from_fixed(rows)


class DenseIndex:
    def __init__(
        self, dim: int, ann_min: int | None = None, cache: GraphCache | None = None
    ) -> None:
        self.dim = dim
        self.ann_min = ann_min
        self.cache = cache
        #: float32 below the graph threshold, 16-bit fixed point past it (``to_fixed``).
        self._matrix: npt.NDArray[np.float32] | npt.NDArray[np.int16] = np.zeros(
            (0, dim), dtype=np.float32
        )
        self.present = np.zeros(0, dtype=bool)
        self._ann: ann.HnswIndex | None = None

    @property
    def method(self) -> str:
        if self._ann is not None:
            return self._ann.method
        if self.ann_min is not None and self.count >= self.ann_min and not ann.available():
            return f"{EXACT}; install tooldb[ann] for an HNSW index past {self.ann_min} tools"
        return EXACT

    @property
    def approximate(self) -> bool:
        """Searched through the HNSW graph (``nearest``) rather than exactly."""
        return self._ann is not None

    @property
    def count(self) -> int:
        return int(self.present.sum())

    def nbytes(self) -> int:
        graph = self._ann.nbytes() if self._ann is not None else 0
        return int(self._matrix.nbytes + self.present.nbytes + graph)

    def set(self, slot: int, vector: Floats | None) -> None:
        if slot >= len(self._matrix):
            # By a quarter: at 100,000 tools doubling would leave up to 75 MB unused.
            size = max(slot + 1, len(self._matrix) + len(self._matrix) // 4, 16)
            grown = np.zeros((size, self.dim), dtype=self._matrix.dtype)
            grown[: len(self._matrix)] = self._matrix
            present = np.zeros(size, dtype=bool)
            present[: len(self.present)] = self.present
            self._matrix, self.present = grown, present
        if vector is None:  # a slot already in the graph stays there, kept out by `present`
            self._matrix[slot] = 0
            self.present[slot] = False
        else:
            self._matrix[slot] = vector if self._matrix.dtype == np.float32 else to_fixed(vector)
            self.present[slot] = True

    def sync(self, size: int) -> None:
        """After a batch of ``set`` (slots below ``size`` in use): past ``ann_min`` vectors,
        load the graph another process saved (or build it), or append the slots added
        since to it."""
        if self._ann is None:
            if self.ann_min is None or self.count < self.ann_min or not ann.available():
                return
            found = self.cache.load(self.dim) if self.cache is not None else None
            reused = found is not None and found[1] <= size
            self._ann = found[0] if found is not None and reused else ann.HnswIndex(self.dim)
            self._append(size)
            # Exactly the slots in use: growth by doubling left up to half of it unused.
            self._matrix = to_fixed(self._matrix[:size])
            self.present = self.present[:size].copy()
            if self.cache is not None:
                self.cache.save(self._ann, force=not reused)
            return
        self._append(size)
        if self.cache is not None:
            self.cache.save(self._ann)

    def _append(self, size: int) -> None:
        assert self._ann is not None
        for start in range(len(self._ann), size, BLOCK_ROWS * 4):
            self._ann.append(self._floats(start, min(size, start + BLOCK_ROWS * 4)))

    def _floats(self, start: int, stop: int) -> Floats:
        """Rows ``start:stop`` as float32 (a copy if the matrix is fixed point)."""
        return _as_floats(self._matrix[start:stop])

    def scores(self, query: Floats, size: int) -> Floats:
        """Cosine of the query with every slot below ``size`` (0 where there is no vector)."""
        if size == 0:
            return np.zeros(0, dtype=np.float32)
        if self._matrix.dtype == np.float32:
            return np.asarray(self._matrix[:size] @ query, dtype=np.float32)
        out = np.empty(size, dtype=np.float32)
        for start in range(0, size, BLOCK_ROWS):
            stop = min(start + BLOCK_ROWS, size)
            out[start:stop] = self._floats(start, stop) @ query
        return out

    def rows(self, slots: Slots) -> Floats:
        """The vectors of ``slots`` as float32 (zero rows where there is none)."""
        return _as_floats(self._matrix[slots])

    def scores_for(self, query: Floats, slots: Slots) -> Floats:
        return np.asarray(self.rows(slots) @ query, dtype=np.float32)

    def graph_filter(self, allowed: npt.NDArray[np.bool_]) -> ann.GraphFilter:
        """The filter ``nearest`` takes: the ``allowed`` slots that have a vector."""
        assert self._ann is not None, "graph_filter() needs the HNSW graph (see approximate)"
        return self._ann.filter(allowed & self.present[: len(allowed)])

    def nearest(self, query: Floats, count: int, allowed: ann.GraphFilter) -> Slots:
        """Up to ``count`` allowed slots with a vector, closest first, through the graph."""
        assert self._ann is not None, "nearest() needs the HNSW graph (see approximate)"
        return self._ann.nearest(query, count, allowed)
