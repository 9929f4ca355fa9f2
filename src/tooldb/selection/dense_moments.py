"""The dense z-score's statistics over every enabled tool, exactly, in one small product.

Past the HNSW threshold a selection scores only its candidates, but the dense z-score
needs the cosine's mean and spread over all the tools it may return. Those follow from
two sums kept over the enabled tools' vectors x: the sum of x and the sum of x xᵀ (a
384 x 384 matrix). For a task vector q, the mean cosine is q·Σx / n and the mean square
is qᵀ(Σx xᵀ)q / n: one 384 x 384 product per select (~150k multiply-adds) instead of
scoring a random sample of 2,048 tools (~790k, and 3 MB of rows read), and exact where
the sample was an estimate. Tools come and go by sums and differences; the sums are
first made when a selection needs them (small registries, scored exactly, never do).

Filters (category, kind, names) keep other tools: their selections estimate the two
figures on an evenly spaced sample of the allowed tools (``index.sample_scores``), as a
sum per filter would cost a pass over the tools each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .vectors import DenseIndex

Floats = npt.NDArray[np.float32]
#: Rows per product when the sums are made or changed (bounds the float32 temporaries).
BLOCK_ROWS = 8_192


class DenseMoments:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._sum = np.zeros(dim, dtype=np.float64)
        self._outer = np.zeros((dim, dim), dtype=np.float64)
        self._query_form: tuple[int, Floats, Floats] | None = None

    def add_slots(self, dense: DenseIndex, slots: npt.NDArray[np.int64]) -> None:
        """Add the vectors of ``slots``, read a block at a time."""
        for start in range(0, len(slots), BLOCK_ROWS):
            self._change(dense.rows(slots[start : start + BLOCK_ROWS]), 1.0)

    def remove(self, rows: npt.NDArray[np.floating]) -> None:
        self._change(rows, -1.0)

    def _change(self, rows: npt.NDArray[np.floating], sign: float) -> None:
        for start in range(0, len(rows), BLOCK_ROWS):
            block = np.asarray(rows[start : start + BLOCK_ROWS], dtype=np.float32)
            # float32 products per block (BLAS), summed in float64 across blocks and changes
            self._outer += sign * (block.T @ block).astype(np.float64)
            self._sum += sign * block.sum(axis=0, dtype=np.float64)
        self._query_form = None

    def mean_and_spread(self, query: Floats, count: int) -> tuple[float, float]:
        """Mean and standard deviation of the query's cosine over ``count`` tools (the
        enabled ones: a tool without a vector adds nothing to the sums, 0 to the mean)."""
        if count <= 0:
            return 0.0, 0.0
        form = self._query_form
        if form is None or form[0] != count:  # float32 copies: what a select multiplies by
            form = self._query_form = (
                count,
                (self._sum / count).astype(np.float32),
                (self._outer / count).astype(np.float32),
            )
        _, mean_vector, second = form
        mean = float(mean_vector @ query)
        square = float(query @ (second @ query))
        return mean, max(square - mean * mean, 0.0) ** 0.5
