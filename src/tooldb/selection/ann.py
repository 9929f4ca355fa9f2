"""Approximate nearest neighbours for large registries: an HNSW graph (faiss).

Exact search over every vector costs ~15 ms at 100,000 tools on one core; an HNSW
graph answers in well under a millisecond, with a recall measured by
``bench/select.py --scale``. The graph keeps its own 8-bit copy of the vectors
(a quarter of float32) only to walk the graph: the candidates it returns are
rescored exactly by the caller. Its ids are the index's slots, added in order, so a
removed tool stays in the graph and is kept out by the filter bitmap.

Why faiss: its HNSW takes a bitmap of allowed ids during the walk (filters and
removed tools cost nothing extra), ships wheels, and, unlike usearch 2.26, does not
crash onnxruntime when imported first. hnswlib built 1.5x slower and keeps float32.
faiss is an optional dependency (extra ``tooldb[ann]``); without it selection stays
exact and ``tooldb doctor`` says so.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

CONNECTIVITY = 16
#: 128 rather than faiss's 40 or our former 64: on MiniLM-like vectors at 100,000 tools the
#: walk then finds 0.97 of the exact dense top 10 at efSearch 128, against 0.93 (the
#: graph takes twice as long to build, once: it is saved, graph_cache.py).
EXPANSION_ADD = 128
#: The walk's breadth (at least the candidates asked for): 64 finds 0.93-0.965 of the
#: exact dense top 10 alone, and the selection's top 10, with the lexical side and exact
#: rescoring, 0.995 of the exact ranking's at 100,000 tools (retrieval.py).
EXPANSION_SEARCH = 64


@functools.cache
def available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class HnswIndex:
    """Slots 0..n-1 -> vectors, searched approximately by inner product (unit vectors)."""

    #: What the graph is (saved graphs are keyed by it: graph_cache.py), and how it is walked.
    build = f"hnsw (faiss, 8-bit, M={CONNECTIVITY}, efConstruction={EXPANSION_ADD})"
    method = f"{build[:-1]}, efSearch={EXPANSION_SEARCH})"

    def __init__(self, dim: int, expansion_add: int = EXPANSION_ADD) -> None:
        import faiss as faiss_module

        faiss: Any = faiss_module  # its SWIG stubs do not type the constructors' overloads
        self._faiss = faiss
        index = faiss.IndexHNSWSQ(
            dim, faiss.ScalarQuantizer.QT_8bit, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT
        )
        index.hnsw.efConstruction = expansion_add
        self._index: Any = index
        #: Per buffer (codes, links): where it was and how big when last collapsed.

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def append(self, vectors: npt.NDArray[np.floating]) -> None:
        """Add the next slots' vectors (zero rows for slots without one) in slot order."""
        if not len(vectors):
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if not self._index.is_trained:  # each dimension's 8-bit range, from the data
            self._index.train(vectors)
        self._faiss.omp_set_num_threads(2)
        try:
            self._index.add(vectors)
        finally:
            self._faiss.omp_set_num_threads(1)

    def filter(self, allowed: npt.NDArray[np.bool_]) -> GraphFilter:
        """What ``nearest`` takes to visit only ``allowed`` slots; reusable while the graph
        holds as many slots (a selection without filters builds it once per reload)."""
        total = len(self)
        mask = np.zeros(total, dtype=bool)
        mask[: min(total, len(allowed))] = allowed[:total]
        return GraphFilter(self._faiss, total, np.packbits(mask, bitorder="little"))

    def nearest(
        self, query: npt.NDArray[np.float32], count: int, allowed: GraphFilter
    ) -> npt.NDArray[np.int64]:
        """Up to ``count`` allowed slots, closest first (approximately)."""
        query = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        _, found = self._index.search(query, count, params=allowed.params(count))
        found = found[0]
        return found[found >= 0].astype(np.int64)

    def nbytes(self) -> int:
        codes = self._faiss.downcast_index(self._index.storage).code_size * len(self)
        links = self._index.hnsw.neighbors.size() * 4
        return int(codes + links)

    def to_bytes(self) -> bytes:
        return bytes(self._faiss.serialize_index(self._index).tobytes())

    @classmethod
    def from_bytes(cls, data: bytes, dim: int) -> HnswIndex:  # efConstruction: saved
        """A graph written by ``to_bytes``; ValueError if it is not one for ``dim``."""
        graph = cls(dim)
        try:
            index = graph._faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        except RuntimeError as exc:
            raise ValueError(f"not a faiss index: {exc}") from None
        if int(index.d) != dim:
            raise ValueError(f"graph of dimension {index.d}, expected {dim}")
        graph._index = index
        return graph


class GraphFilter:
    """A bitmap of the slots a walk may return, with faiss's selector over it."""

    def __init__(self, faiss: Any, total: int, bits: npt.NDArray[np.uint8]) -> None:
        self.total = total
        self._bits = bits  # the selector points into it: kept alive with it
        self._selector = faiss.IDSelectorBitmap(total, faiss.swig_ptr(bits))
        self._faiss = faiss
        self._params: dict[int, Any] = {}

    def params(self, count: int) -> Any:
        params = self._params.get(count)
        if params is None:
            params = self._params[count] = self._faiss.SearchParametersHNSW(
                efSearch=max(EXPANSION_SEARCH, count), sel=self._selector
            )
        return params
