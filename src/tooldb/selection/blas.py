"""Selection's matrix products on one BLAS thread.

numpy's OpenBLAS splits a matrix-vector product over every core once it has more than
~9,000 elements (24 tool vectors of 384 dimensions). On a small machine with anything
else running, the second thread waits for a core: measured on two cores beside a busy
process, 10,000 x 384 took 8.0 ms on two threads and 0.41 ms on one (1,000 rows: the
same 37 µs either way). A selection's products are small, so they run on one thread.

The thread count is the process's, shared with every other user of numpy: it is lowered
only while a selection is scoring (the first to enter lowers it, the last to leave puts
back what it was). threadpoolctl finds numpy's BLAS when the first selection scores.
Only libraries with one process-wide pool are lowered: an OpenMP-threaded BLAS (faiss-cpu
bundles one; selection's products do not use it) takes a limit per thread, which a
shared count cannot manage.

threadpoolctl (3.8) lets only one "controlling" thread change a pthreads OpenBLAS and
silently ignores the others, but selections run on whichever thread calls ``select``
(worker threads under ``acall``, the agent loop and the MCP server): ``set_threads``
takes control for the calling thread first, under this module's lock.
"""

from __future__ import annotations

import threading
from typing import Any

from threadpoolctl import ThreadpoolController


def blas_libraries() -> list[Any]:
    """threadpoolctl's controller of every BLAS loaded now with a process-wide pool."""
    found = ThreadpoolController().select(user_api="blas").lib_controllers
    return [library for library in found if getattr(library, "threading_layer", "") != "openmp"]


def set_threads(library: Any, count: int) -> None:
    """Set ``library``'s thread count from this thread, whichever thread set it before."""
    clear = getattr(type(library), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    library.set_num_threads(count)


class _OneThread:
    """Reference-counted lowering of the thread count (selections may overlap). Only the
    libraries' own get/set calls run per selection: threadpoolctl's ``limit`` would read
    every library's full description each time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._before: list[int] = []
        self._libraries: list[Any] | None = None

    def __enter__(self) -> None:
        with self._lock:
            if self._libraries is None:  # the libraries loaded by the first selection
                self._libraries = blas_libraries()
            if self._inside == 0:
                self._before = [library.num_threads for library in self._libraries]
                for library, before in zip(self._libraries, self._before, strict=True):
                    if before != 1:
                        set_threads(library, 1)
            self._inside += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._libraries:
                for library, before in zip(self._libraries, self._before, strict=True):
                    if before != 1:
                        set_threads(library, before)


#: ``with one_thread:`` runs numpy's matrix products on one thread (see the module).
one_thread = _OneThread()


def blas_threads() -> list[int]:
    """Each loaded BLAS's thread count now (for tests and ``tooldb doctor``)."""
    return [library.num_threads for library in blas_libraries()]
