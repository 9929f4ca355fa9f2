"""Selection's matrix products run on one BLAS thread, and the process's thread count
is back as it was afterwards (selection/blas.py, through threadpoolctl)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import tooldb
from tooldb import Settings
from tooldb.selection.blas import blas_libraries, blas_threads, one_thread, set_threads
from tooldb.selection.vectors import DenseIndex


def test_numpys_openblas_is_found() -> None:
    """numpy's wheels bundle OpenBLAS: if discovery finds nothing, the cap does nothing."""
    assert any("openblas" in str(info).lower() for info in np.show_config("dicts").values())
    found = [library.internal_api for library in blas_libraries()]
    assert "openblas" in found, f"numpy's OpenBLAS was not found among the loaded ones: {found}"


@pytest.fixture
def two_threads() -> object:
    """Every OpenBLAS at 2 threads for the test (a 1-core CI machine starts at 1)."""
    libraries = blas_libraries()
    before = [library.num_threads for library in libraries]
    for library in libraries:
        set_threads(library, 2)
    yield
    for library, count in zip(libraries, before, strict=True):
        set_threads(library, count)


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
