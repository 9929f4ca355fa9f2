"""The random tools a large registry estimates a query's cosine mean and spread on.

Past the HNSW threshold, selection does not score every tool, so the dense z-score's
statistics come from a fixed random draw of the allowed tools (retrieval.py). The
draw is fixed while the index holds about as many slots, and its rows are kept as
float32 (no per-query conversion). Which rows a filter keeps is worked out once per
reload for the unfiltered case, and then only those rows are scored.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .vectors import DenseIndex

#: The sample is drawn from this many times its size of random slots; a filter leaving
#: fewer than MIN_SAMPLE of them walks the whole random order instead.
SAMPLE_POOL_FACTOR = 2
MIN_SAMPLE = 256

Floats = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]
Slots = npt.NDArray[np.int64]


class DenseSample:
    def __init__(self, dense: DenseIndex) -> None:
        self.dense = dense
        self._order = np.zeros(0, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int64)
        self._rows: Floats | None = None
        self._draw = 0

    def scores(
        self, query: Floats, allowed: Mask, count: int, size: int, memo: dict[Any, Any] | None
    ) -> Floats:
        """Cosines of the query with up to ``count`` allowed tools of the draw. ``memo``
        (kept with a mask that serves many selections) remembers what the mask keeps."""
        if len(self._order) < size * 0.9 or len(self._order) > size:
            self._order = np.random.default_rng(size).permutation(size).astype(np.int64)
            self._rows = None
        if self._rows is None:
            self._slots = self._order[: SAMPLE_POOL_FACTOR * count]
            self._rows = self.dense.rows(self._slots)
            self._draw += 1
        plan: _Kept | Slots
        if memo is None:
            plan = self._plan(allowed, count, probe=False)
        elif (key := ("sample", count, self._draw)) in memo:
            plan = memo[key]
        else:
            plan = memo[key] = self._plan(allowed, count, probe=True)
        if not isinstance(plan, _Kept):
            return self.dense.scores_for(query, plan)
        if plan.rows is not None and query.dtype == np.float32 and query.flags.c_contiguous:
            return np.asarray(plan.rows @ query, dtype=np.float32)
        return np.asarray(self._rows @ query, dtype=np.float32)[plan.keep][:count]

    def _plan(self, allowed: Mask, count: int, *, probe: bool) -> _Kept | Slots:
        """Which rows of the draw a mask keeps, or (a narrow filter) the slots to score."""
        assert self._rows is not None
        keep = allowed[self._slots]
        if np.count_nonzero(keep) >= min(count, MIN_SAMPLE):
            if not probe:
                return _Kept(keep, None)
            rows = np.ascontiguousarray(self._rows[keep][:count])
            return _Kept(keep, rows if same_sums(rows, self._rows, keep, count) else None)
        return self._order[allowed[self._order]][:count]  # walk the whole draw


def same_sums(rows: Floats, whole: Floats, keep: Mask, count: int) -> bool:
    """Whether ``rows @ q`` gives, bit for bit, what ``(whole @ q)[keep][:count]`` does.

    Scoring only the kept rows halves the work, but a BLAS kernel may sum a row in
    another order depending on the matrix's shape (a 4-row block or the remainder).
    Which kernel serves a row depends on shapes, not values: two random probes settle
    it for the plan's lifetime."""
    probes = np.random.default_rng(0).standard_normal((2, whole.shape[1])).astype(np.float32)
    for probe in probes:
        expected = np.asarray(whole @ probe, dtype=np.float32)[keep][:count]
        if not np.array_equal(np.asarray(rows @ probe, dtype=np.float32), expected):
            return False
    return True


class _Kept:
    """The draw's rows a mask keeps; ``rows`` their copy when scoring it alone gives the
    very same numbers."""

    __slots__ = ("keep", "rows")

    def __init__(self, keep: Mask, rows: Floats | None) -> None:
        self.keep, self.rows = keep, rows
