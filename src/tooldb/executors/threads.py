"""The thread pool that runs blocking work (sync tools, database drivers) for async callers.

``asyncio.to_thread`` uses the loop's default executor, which has ``cpu_count + 4``
threads: on a small machine that quietly serialises a batch of parallel calls.
This pool is shared by every executor and grows to whatever the registries ask of
it (``reserve``); threads are only started when work arrives, and the caller's
limits (``max_parallel_calls``) decide how many calls actually run at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_WORKERS = 64

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_size = DEFAULT_WORKERS


def reserve(workers: int) -> None:
    """Make sure at least ``workers`` blocking calls can run at once.

    A bigger pool replaces the current one; work already running there finishes.
    """
    global _pool, _size
    with _lock:
        if workers <= _size:
            return
        _size = workers
        old, _pool = _pool, None
    if old is not None:
        old.shutdown(wait=False)


def _current() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_size, thread_name_prefix="tooldb-call")
        return _pool


async def run_blocking(func: Callable[..., T], /, *args: Any) -> T:
    """Run ``func(*args)`` in the pool, with the caller's context variables."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return await loop.run_in_executor(_current(), functools.partial(context.run, func, *args))


def _forget_pool_after_fork() -> None:
    global _pool, _lock
    _pool = None  # its threads do not exist in the child
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)
