"""Per-tool concurrency limits that hold across every worker sharing one PostgreSQL.

A tool whose metadata says ``max_concurrency: N`` has N slots per tenant; a call takes
one for as long as its tool runs. A slot is a PostgreSQL session advisory lock
(``pg_try_advisory_lock(key, slot)``) held on a connection of its own, so it is taken
and given back atomically, and a worker that is killed gives its slots back with its
connections: nothing to expire, nothing to clean up. A call that finds every slot taken
waits (polling with a short backoff) until one frees or its timeout passes.

Workers wrap their registry's executors in ``LimitedExecutor``, so every path that runs
a tool on a worker, the agent loop and ``call_many`` alike, goes through the slots.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from ..errors import ToolTimeout
from ..executors import Executor
from ..types import ToolRecord

POLL_S = 0.005
POLL_MAX_S = 0.05


def max_concurrency(tool: ToolRecord) -> int | None:
    value = tool.spec.metadata.get("max_concurrency")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def lock_key(tenant: str, tool: str) -> int:
    """A signed 32-bit key for the (tenant, tool) pair (the first of the lock's two)."""
    digest = hashlib.blake2b(f"tooldb-tool\0{tenant}\0{tool}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


class Slots:
    """Takes and gives back tool slots on connections to one database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._idle: list[psycopg.Connection[Any]] = []

    def _connection(self) -> psycopg.Connection[Any]:
        try:
            return self._idle.pop()
        except IndexError:
            return psycopg.connect(self.url, autocommit=True)

    @contextmanager
    def held(self, tenant: str, tool: str, limit: int, timeout_s: float | None) -> Iterator[int]:
        """Hold one of ``tool``'s ``limit`` slots (its number) while the block runs."""
        key = lock_key(tenant, tool)
        connection = self._connection()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        wait = POLL_S
        try:
            while True:
                for slot in range(limit):
                    row = connection.execute(
                        "SELECT pg_try_advisory_lock(%s, %s)", (key, slot)
                    ).fetchone()
                    if row is not None and row[0]:
                        try:
                            yield slot
                        finally:
                            connection.execute("SELECT pg_advisory_unlock(%s, %s)", (key, slot))
                        return
                if deadline is not None and time.monotonic() >= deadline:
                    raise ToolTimeout(
                        f"tool {tool!r}: all {limit} of its slots (max_concurrency) stayed "
                        f"taken for {timeout_s:g} s"
                    )
                time.sleep(wait)
                wait = min(wait * 2, POLL_MAX_S)
        finally:
            if connection.closed or connection.broken:
                connection.close()
            else:
                self._idle.append(connection)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class LimitedExecutor:
    """An executor whose tools with ``max_concurrency`` run only in a free slot."""

    def __init__(self, inner: Executor, slots: Slots, tenant: str) -> None:
        self.inner = inner
        self.kind = inner.kind
        self._slots = slots
        self._tenant = tenant

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # check, prepare, blocking, ...

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        limit = max_concurrency(tool)
        if limit is None:
            return self.inner.run(tool, arguments, timeout_s)
        with self._slots.held(self._tenant, tool.name, limit, timeout_s):
            return self.inner.run(tool, arguments, timeout_s)

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        limit = max_concurrency(tool)
        if limit is None:
            return await self.inner.arun(tool, arguments, timeout_s)
        # the slot is taken and held on a thread: its connection blocks
        return await asyncio.to_thread(self.run, tool, arguments, timeout_s)
