"""Selection's matrix products run on one OpenBLAS thread, and the process's thread
count is back as it was afterwards (blas.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import tooldb
from tooldb import Settings
from tooldb.selection.blas import blas_threads, find_openblas, one_thread
from tooldb.selection.vectors import DenseIndex


def test_numpys_openblas_is_found() -> None:
    """numpy's wheels bundle OpenBLAS: if discovery finds nothing, the cap does nothing."""
    assert any("openblas" in str(info).lower() for info in np.show_config("dicts").values())
    assert find_openblas(), "numpy's OpenBLAS was not found among the loaded libraries"


@pytest.fixture
def two_threads() -> object:
    """Every OpenBLAS at 2 threads for the test (a 1-core CI machine starts at 1)."""
    controls = find_openblas()
    before = [get() for get, _ in controls]
    for _, put in controls:
        put(2)
    yield
    for (_, put), count in zip(controls, before, strict=True):
        put(count)


def test_a_selection_scores_on_one_thread(two_threads: object, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    registry = tooldb.open(url, settings=Settings(url=url, embedder="hash"))
    registry.add(*[
        {"name": f"tool_{i}", "description": f"Tool {i} converts units of measure {i}.",
         "target": "tests.sample_tools:echo"}
        for i in range(40)
    ])  # fmt: skip
    seen: list[list[int]] = []
    scores = DenseIndex.scores

    def spy(self: DenseIndex, query: np.ndarray, size: int) -> np.ndarray:
        seen.append(blas_threads())
        return scores(self, query, size)

    DenseIndex.scores = spy  # type: ignore[method-assign]
    try:
        assert registry.select("convert units", 3).names
    finally:
        DenseIndex.scores = scores  # type: ignore[method-assign]
        registry.close()
    assert seen and all(counts == [1] * len(counts) for counts in seen)
    assert set(blas_threads()) == {2}  # put back


def test_overlapping_selections_put_the_count_back_once(two_threads: object) -> None:
    inside = threading.Barrier(2)
    during: list[list[int]] = []

    def score() -> None:
        with one_thread:
            inside.wait()
            during.append(blas_threads())
            inside.wait()

    workers = [threading.Thread(target=score) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(set(counts) == {1} for counts in during)
    assert set(blas_threads()) == {2}
    with one_thread, one_thread:
        assert set(blas_threads()) == {1}
    assert set(blas_threads()) == {2}
