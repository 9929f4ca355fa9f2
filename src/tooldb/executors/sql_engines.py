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
  ``statement_timeout`` locally; a connection given back to the pool is rolled back
  and reset with ``DISCARD ALL`` (advisory locks, session settings, temporary tables,
  prepared statements: nothing a statement did outlives its call); ``cancel_safe``
  stops a running statement from another thread.
* The ``registry`` connection is scoped to the caller's tenant (sql_tenancy.py).
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
from .sql_tenancy import check_role, guard_sqlite, scope_sqlite

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


def create_engine(
    name: str, url: str, access: Access, busy_timeout_s: float, *, registry: bool = False
) -> sa.Engine:
    """A pooled engine for one connection and access mode (created once, shared);
    ``registry``: the registry's own database, scoped to the caller's tenant."""
    if dialect_of(name, url) == "postgresql":
        return _postgres_engine(url, access, registry)
    return _sqlite_engine(name, url, access, busy_timeout_s, registry)


def _postgres_engine(url: str, access: Access, registry: bool) -> sa.Engine:
    engine = create_postgres_engine(url, pool_reset_on_return=None)
    read_only = access is Access.READ

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        if registry:
            check_role(dbapi_connection)
        dbapi_connection.read_only = read_only  # psycopg then opens with BEGIN READ ONLY

    @event.listens_for(engine, "reset")
    def _reset(dbapi_connection: Any, _record: Any, state: Any) -> None:
        dbapi_connection.rollback()
        if state.terminate_only:
            return
        dbapi_connection.autocommit = True  # DISCARD ALL cannot run in a transaction
        try:
            dbapi_connection.execute("DISCARD ALL")
        finally:
            dbapi_connection.autocommit = False

    return engine


def _sqlite_engine(
    name: str, url: str, access: Access, busy_timeout_s: float, registry: bool
) -> sa.Engine:
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
        if registry:
            scope_sqlite(dbapi_connection, _record)
        else:
            guard_sqlite(dbapi_connection)

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        dbapi_connection.execute(f"PRAGMA query_only={query_only}")

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


def start_transaction(conn: sa.Connection, timeout_s: float, scope: dict[str, str]) -> None:
    """PostgreSQL's per-transaction settings (``SET LOCAL``), issued first thing in the
    transaction, in one round trip: ``statement_timeout`` and the tenant ``scope``."""
    if conn.dialect.name != "postgresql":
        return
    values = {"statement_timeout": str(max(1, round(timeout_s * 1000))), **scope}
    calls = ", ".join(f"set_config(:k{i}, :v{i}, true)" for i in range(len(values)))
    parameters: dict[str, str] = {}
    for i, (key, value) in enumerate(values.items()):
        parameters[f"k{i}"], parameters[f"v{i}"] = key, value
    conn.execute(sa.text(f"SELECT {calls}"), parameters)


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
