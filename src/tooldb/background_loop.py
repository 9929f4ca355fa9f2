"""Running coroutines from synchronous code: named event loops in daemon threads, one per
name per process, and ``run_sync`` for one coroutine from anywhere.

Sync callers use them to run coroutines even from inside someone else's running loop
(async Python tools), and long-lived async resources live on one (MCP sessions must be
opened and closed by the same task). A forked child starts without them: the parent's
threads do not exist there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


class BackgroundLoop:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run to completion and return the result (the caller's thread blocks)."""
        return self.submit(coro).result()


_LOOPS: dict[str, BackgroundLoop] = {}
_LOCK = threading.Lock()


def _forget_loops_after_fork() -> None:
    _LOOPS.clear()


os.register_at_fork(after_in_child=_forget_loops_after_fork)


def background_loop(name: str) -> BackgroundLoop:
    """The process's loop called ``name``, started on first use."""
    with _LOCK:
        loop = _LOOPS.get(name)
        if loop is None:
            loop = _LOOPS[name] = BackgroundLoop(name)
        return loop


def run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from synchronous code, even inside a running loop
    (then on a fresh loop in a helper thread, as ``Registry.call`` does for async tools)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_boxed(coroutine)).value
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tooldb-many") as helper:
        return helper.submit(asyncio.run, _boxed(coroutine)).result().value


class _Box(Generic[_T]):
    """The result, behind a constant ``repr``: on the main thread ``asyncio.run`` restores
    SIGINT's handler, and the signal module's enum conversion then formats the repr of
    the finished task, result included (1-3 ms for an agent run's RunResult)."""

    __slots__ = ("value",)

    def __init__(self, value: _T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coroutine: Coroutine[Any, Any, _T]) -> _Box[_T]:
    return _Box(await coroutine)
