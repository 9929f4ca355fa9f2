"""Engines for SQL tools, one per (connection, access), and how each dialect enforces
read-only access, a statement timeout and an interrupt from another thread.

* SQLite: every connection checked out of a read engine gets ``PRAGMA
  query_only=ON`` (again on each checkout, so no statement can leave it off for
  the next call); write engines take the write lock up front (``BEGIN IMMEDIATE``)
  like the registry's own store. ``sqlite3.Connection.interrupt`` stops a running
  statement.
* PostgreSQL: a read engine's connections are psycopg ``read_only``, so every
  transaction starts with ``BEGIN READ ONLY`` (no statement can lift it for the
  transaction or leave the connection writable); every transaction sets
  ``statement_timeout`` locally; ``cancel_safe`` stops a running statement from
  another thread.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url

from ..errors import DefinitionError, ExecutionError
from ..stores.postgres import create_postgres_engine
from .sql_plan import Access

SUPPORTED = ("sqlite", "postgresql")
_POOL = {"pool_size": 8, "max_overflow": 24}


def dialect_of(name: str, url: str) -> str:
    """The dialect of a connection URL, or DefinitionError naming the connection."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        raise DefinitionError(f"connection {name!r} has an invalid URL") from None
    dialect = "postgresql" if parsed.get_backend_name() == "postgres" else parsed.get_backend_name()
    if dialect not in SUPPORTED:
        raise DefinitionError(
            f"connection {name!r} uses {dialect!r}: SQL tools run on sqlite or postgresql"
        )
    if dialect == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise DefinitionError(
            f"connection {name!r} is an in-memory SQLite database, which each connection "
            "would see empty: use a file"
        )
    return dialect


def create_engine(name: str, url: str, access: Access, busy_timeout_s: float) -> sa.Engine:
    """A pooled engine for one connection and access mode (created once, shared)."""
    if dialect_of(name, url) == "postgresql":
        return _postgres_engine(url, access)
    return _sqlite_engine(name, url, access, busy_timeout_s)


def _postgres_engine(url: str, access: Access) -> sa.Engine:
    engine = create_postgres_engine(url)
    read_only = access is Access.READ

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.read_only = read_only  # psycopg then opens with BEGIN READ ONLY

    return engine


def _sqlite_engine(name: str, url: str, access: Access, busy_timeout_s: float) -> sa.Engine:
    parsed = make_url(url)
    database = parsed.database or ""
    if not database.startswith("file:") and not Path(database).expanduser().is_file():
        raise ExecutionError(f"connection {name!r}: SQLite database {database} does not exist")
    engine = sa.create_engine(
        parsed, connect_args={"timeout": busy_timeout_s, "check_same_thread": False}, **_POOL
    )
    query_only = "ON" if access is Access.READ else "OFF"
    begin = "BEGIN IMMEDIATE" if access is Access.WRITE else "BEGIN"

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are ours: ``_begin``
        dbapi_connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        dbapi_connection.execute(f"PRAGMA query_only={query_only}")

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


def start_transaction(conn: sa.Connection, timeout_s: float | None) -> None:
    """Per-transaction settings, issued first thing in the transaction."""
    if conn.dialect.name != "postgresql":
        return
    if timeout_s is not None:
        milliseconds = str(max(1, round(timeout_s * 1000)))
        conn.execute(
            sa.text("SELECT set_config('statement_timeout', :ms, true)"), {"ms": milliseconds}
        )


def interrupter(conn: sa.Connection) -> Callable[[], None]:
    """A function another thread may call to stop the statement running on ``conn``."""
    driver: Any = conn.connection.dbapi_connection
    if conn.dialect.name == "sqlite":
        interrupt: Callable[[], None] = driver.interrupt
        return interrupt
    return lambda: driver.cancel_safe(timeout=5.0)


def is_read_only_violation(exc: sa.exc.DBAPIError) -> bool:
    """The database refused a write because the transaction or connection is read-only."""
    orig = exc.orig
    return (
        getattr(orig, "sqlstate", None) == "25006"
        or getattr(orig, "sqlite_errorname", None) == "SQLITE_READONLY"
    )


def is_statement_timeout(exc: sa.exc.DBAPIError) -> bool:
    """PostgreSQL stopped the statement at its ``statement_timeout``."""
    orig = exc.orig
    return getattr(orig, "sqlstate", None) == "57014" and "statement timeout" in str(orig)
