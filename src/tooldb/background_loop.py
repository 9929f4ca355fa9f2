"""Named event loops in daemon threads, one per name per process.

Sync callers use them to run coroutines even from inside someone else's running loop
(async Python tools), and long-lived async resources live on one (MCP sessions must be
opened and closed by the same task). A forked child starts without them: the parent's
threads do not exist there.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

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
