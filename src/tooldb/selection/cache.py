"""What a selection can reuse when the same task is asked again: its vector and its pool.

Agents and routers ask with the same tasks over and over (a retried run, a sub-agent's
recurring sub-task, a router serving a fixed menu of requests, ``search_tools`` with
the same query). Two parts of a ``select`` depend only on the task and the registry's
contents, so they are remembered exactly, in small least-recently-used maps:

- the task's vector (text and embedder only): 2-6 ms of a real model per select;
- the pool, the tools of best blended relevance and their scores (also the index's
  state: the key holds the generation it was computed at, so any change to any tool
  misses). The ranking is redone on every select from statistics read fresh, so a
  tool that starts failing still sinks at once.

Long tasks are not kept (they rarely repeat, and the key is the text), nor the large
pools of a large k (memory).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

#: Tasks longer than this are computed every time.
MAX_TASK_CHARS = 2_000
#: Entries per map: a 384-d vector is 1.5 KB, a remembered pool of 50 tools ~20 KB.
ENTRIES = 256
#: Larger pools (k over 40) are not remembered: at most ~80 KB an entry, ~20 MB in all.
MAX_POOL = 200

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """A thread-safe least-recently-used map of at most ``entries`` items."""

    def __init__(self, entries: int = ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        if self.entries > 0:
            with self._lock:
                self._items[key] = value
                self._items.move_to_end(key)
                while len(self._items) > self.entries:
                    self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
