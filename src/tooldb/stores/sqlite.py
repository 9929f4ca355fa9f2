"""SQLite engine: WAL, immediate write transactions, a generous busy timeout.

``BEGIN IMMEDIATE`` takes the write lock up front, so concurrent writers queue
on the busy timeout instead of failing with SQLITE_BUSY on a lock upgrade;
WAL lets readers run beside the writer, and a commit survives the process
being killed as soon as it returns (``synchronous=NORMAL`` only risks the
last commits on power loss, not on a crash).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url

from ..settings import default_data_dir


def database_file(url: str) -> str | None:
    """The database's file path, or None for in-memory and URI databases."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return str(Path(database).expanduser())


def _private_file(path: Path) -> None:
    """The registry holds every tenant's call arguments: its directory is made 0700 and
    the file 0600 (SQLite gives its -wal and -shm files the database file's mode). A file
    made by an older version, readable by others, is tightened."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    home = path.parent
    if (
        home == default_data_dir()
        and home.stat().st_mode & 0o077
        and home.stat().st_uid == os.geteuid()
    ):
        home.chmod(0o700)
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        mode = os.fstat(fd).st_mode
        if mode & 0o077 and os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, mode & 0o700)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(OSError):
            side = Path(f"{path}{suffix}")
            if side.stat().st_mode & 0o077 and side.stat().st_uid == os.geteuid():
                side.chmod(0o600)


def create_sqlite_engine(url: str, busy_timeout_s: float) -> sa.Engine:
    parsed = make_url(url)
    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        _private_file(Path(database).expanduser())
    engine = sa.create_engine(
        parsed,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        # The driver never opens transactions (``_begin`` below does), so say so: then
        # SQLAlchemy has no isolation level to restore when an AUTOCOMMIT reader hands
        # its connection back. Restoring one ran ``PRAGMA read_uncommitted``, which
        # expires every prepared statement of the connection (+20 µs on the next write).
        isolation_level="AUTOCOMMIT",
        # Most recently used first: one thread reading and writing keeps one connection
        # whose page cache stays valid across its own commits.
        pool_use_lifo=True,
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module; we BEGIN ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")
        _ensure_ln(dbapi_connection, cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        if connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _ensure_ln(dbapi_connection: Any, cursor: Any) -> None:
    """OODA's latency test sums ln(); SQLite builds without the math functions get
    Python's (slower, same values)."""
    import sqlite3

    try:
        cursor.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        dbapi_connection.create_function("ln", 1, math.log, deterministic=True)


_write_locks: dict[str, threading.Lock] = {}


def _fresh_locks_after_fork() -> None:
    """A lock another thread held at the fork would stay held in the child forever."""
    for key in _write_locks:
        _write_locks[key] = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks_after_fork)


class _FileWriteLock:
    """This process's lock for one database file (see ``write_lock``)."""

    __slots__ = ("_key",)

    def __init__(self, key: str) -> None:
        self._key = key
        _write_locks.setdefault(key, threading.Lock())

    def __enter__(self) -> None:
        _write_locks[self._key].acquire()

    def __exit__(self, *_exc: object) -> None:
        _write_locks[self._key].release()


def write_lock(path: str | None) -> AbstractContextManager[None]:
    """This process's lock for recording into the database file ``path``.

    Threads of one process that commit at once (a ``call_many`` batch recording its
    calls) would otherwise queue on SQLite's busy handler, which sleeps 1, 2, 5, 10 ...
    ms between tries: ten parallel calls lost milliseconds each to it. A Python lock
    hands the write over the moment the holder commits; other processes still queue
    on the busy timeout. One lock per file, shared by every store opened on it.
    """
    if path is None:
        return contextlib.nullcontext()
    return _FileWriteLock(os.path.realpath(path))


#: Pages the WAL may hold before a committing writer checkpoints it itself: only a
#: backstop, the background checkpointer keeps it far below (40 MB at 4 KiB pages).
BACKSTOP_CHECKPOINT_PAGES = 10_000


class Checkpointer:
    """Copies the WAL back into the database from a background thread.

    SQLite's automatic checkpoint runs inside whichever commit crosses 1,000 pages, so
    every few hundred recorded calls one call paid milliseconds (the benchmark's p99).
    Here a daemon thread runs a PASSIVE checkpoint (it never blocks readers or writers)
    every ``interval_s``; the raised auto-checkpoint threshold remains as a backstop if
    the thread cannot keep up, so the WAL stays bounded either way.
    """

    def __init__(self, path: str, interval_s: float = 0.5) -> None:
        self.path = path
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tooldb-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import sqlite3

        try:
            connection = sqlite3.connect(self.path, timeout=1.0, isolation_level=None)
        except sqlite3.Error:
            return
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    continue  # busy or gone: the backstop still bounds the WAL
        finally:
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
