"""Per-thread SQLite connections for the statements that run on every call and turn.

A pool checkout and check-in costs about as much as the SQLite statement it serves
(the tool-head read, the call record, a run's messages), and an agent turn does
three. On a SQLite file each thread instead keeps one connection of its own,
taken from the pool once (so it got the same pragmas) and detached from it (so it
never holds a pool slot). PostgreSQL keeps the pool: its round trip dwarfs the
checkout, and its connections are a server resource to share.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import PoolProxiedConnection, QueuePool

from ..errors import StoreError

#: Forks this process descends from: a connection opened before a fork is never used
#: after it (cheaper to compare per statement than ``os.getpid()``, a system call).
_FORKS = [0]


def _forked() -> None:
    _FORKS[0] += 1


os.register_at_fork(after_in_child=_forked)


class HotConnections:
    """One detached DBAPI connection per thread (and process), closed with the store."""

    def __init__(self, engine: sa.Engine, guard: Callable[[], Any]) -> None:
        self._engine = engine
        self._guard = guard
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[PoolProxiedConnection] = []
        self._closed = False

    @staticmethod
    def suits(engine: sa.Engine) -> bool:
        """A SQLite file (a queue pool); in-memory databases live in one connection."""
        return engine.dialect.name == "sqlite" and isinstance(engine.pool, QueuePool)

    def get(self) -> PoolProxiedConnection:
        local = self._local
        connection: PoolProxiedConnection | None = getattr(local, "connection", None)
        if connection is not None and local.forks == _FORKS[0] and not self._closed:
            return connection
        with self._guard():
            connection = self._engine.raw_connection()
        connection.detach()
        with self._lock:
            if self._closed:
                connection.close()
                raise StoreError(f"store {self._engine.url!r} is closed")
            self._open.append(connection)
        self._local.connection = connection
        self._local.forks = _FORKS[0]
        return connection

    def discard(self, connection: PoolProxiedConnection) -> None:
        """Drop this thread's connection after a driver error; the next ``get`` opens anew."""
        if getattr(self._local, "connection", None) is connection:
            self._local.connection = None
        with self._lock:
            if connection in self._open:
                self._open.remove(connection)
        connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._open = self._open, []
        for connection in connections:
            try:
                connection.close()
            except Exception:  # closing from another thread than the owner's: best effort
                continue
