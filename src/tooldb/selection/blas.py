"""Selection's matrix products on one BLAS thread.

numpy's OpenBLAS splits a matrix-vector product over every core once it has more than
~9,000 elements (24 tool vectors of 384 dimensions). On a small machine with anything
else running, the second thread waits for a core: measured on two cores beside a busy
process, 10,000 x 384 took 8.0 ms on two threads and 0.41 ms on one (1,000 rows: the
same 37 µs either way). A selection's products are small, so they run on one thread.

The thread count is the process's, shared with every other user of numpy: it is lowered
only while a selection is scoring (the first to enter lowers it, the last to leave puts
back what it was), and left alone where the BLAS is not an OpenBLAS this module finds
(MKL, Accelerate: their own heuristics stand). Another OpenBLAS loaded by the first
selection (faiss-cpu bundles one) is lowered with numpy's.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from pathlib import Path

#: Suffixes of the thread-count functions in numpy's bundled OpenBLAS builds
#: (``scipy_openblas64_``, older ``openblas64_``) and in a system OpenBLAS.
_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")


Control = tuple[Callable[[], int], Callable[[int], None]]


def find_openblas() -> list[Control]:
    """The get/set thread-count functions of every OpenBLAS loaded: numpy's, and any
    other a package bundles (faiss-cpu ships its own)."""
    import numpy  # noqa: F401  (loads its BLAS)

    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:  # not Linux
        return []
    paths = {line.split(None, 5)[-1] for line in maps.splitlines() if "openblas" in line}
    found = []
    for path in sorted(paths):
        if not path.startswith("/"):
            continue
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        control = _control(library)
        if control is not None:
            found.append(control)
    return found


def _control(library: ctypes.CDLL) -> Control | None:
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            if getter is not None and setter is not None:
                getter.restype, getter.argtypes = ctypes.c_int, []
                setter.restype, setter.argtypes = None, [ctypes.c_int]
                return getter, setter
    return None


class _OneThread:
    """Reference-counted lowering of the thread count (selections may overlap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._before: list[int] = []
        self._found: list[Control] | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._found is None:  # the libraries loaded by the first selection
                self._found = find_openblas()
            if self._inside == 0:
                self._before = [get() for get, _ in self._found]
                for (_, put), before in zip(self._found, self._before, strict=True):
                    if before != 1:
                        put(1)
            self._inside += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._found:
                for (_, put), before in zip(self._found, self._before, strict=True):
                    if before != 1:
                        put(before)


#: ``with one_thread:`` runs numpy's matrix products on one thread (see the module).
one_thread = _OneThread()


def blas_threads() -> list[int]:
    """Each loaded OpenBLAS's thread count now (for tests and ``tooldb doctor``)."""
    return [get() for get, _ in find_openblas()]
