"""SQLite engine: WAL, immediate write transactions, a generous busy timeout.

``BEGIN IMMEDIATE`` takes the write lock up front, so concurrent writers queue
on the busy timeout instead of failing with SQLITE_BUSY on a lock upgrade;
WAL lets readers run beside the writer, and a commit survives the process
being killed as soon as it returns (``synchronous=NORMAL`` only risks the
last commits on power loss, not on a crash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url


def create_sqlite_engine(url: str, busy_timeout_s: float) -> sa.Engine:
    parsed = make_url(url)
    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
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
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        if connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
