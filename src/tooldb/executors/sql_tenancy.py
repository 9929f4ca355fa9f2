"""SQL tools over the registry see their caller's tenant only; no SQL tool attaches files.

* SQLite, the ``registry`` connection: each connection gets temporary views named like
  the tenant-owned tables (``calls`` is ``temp.calls``, which shadows ``main.calls``),
  each reading an inner view whose name is random per connection, which keeps the rows
  where the tenant is ``tooldb_tenant()``: a Python function returning what the
  executor set for the call in progress (no statement can change it). An authorizer
  then allows a statement to read the registry's tables only from those inner views
  (a statement cannot name them: it cannot read the temp schema), to read the public
  views and ``json_each``/``json_tree``, to call functions, and nothing else: no other
  table, no ``sqlite_master``, no pragma but ``query_only=ON``, no write, no ``ATTACH``.
* SQLite, every other connection: the authorizer refuses ``ATTACH``/``DETACH`` (which
  ``VACUUM INTO`` goes through), so no statement reads or creates another file.
* PostgreSQL, the ``registry`` connection: statements run as ``tooldb_sql``, checked on
  connect to be subject to row-level security on every tenant table and to hold none of
  the server-file roles; each transaction sets the tenant and its MAC
  (stores/tenant_scope.py).
"""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from ..errors import ExecutionError
from ..stores.tenant_scope import MAC_SETTING, SCOPES, SQL_ROLE, TENANT_SETTING, tenant_mac

#: Connection-record key of the SQLite tenant slot (a one-item list the executor fills).
TENANT_SLOT = "tooldb_tenant"

_OK, _DENY = sqlite3.SQLITE_OK, sqlite3.SQLITE_DENY
_ATTACH = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH}
_TABLE_FUNCTIONS = {"json_each", "json_tree"}
_ON = {"on", "1", "true", "yes"}
#: A view whose condition reads no real column of its table (only the rowid alias,
#: ``tool_search.tool_id``) makes SQLite authorize a column-less read of the table from
#: the top level once flattened into ``SELECT count(*)``, which the guard refuses:
#: read a real column (a condition SQLite cannot drop, unlike ``IS NOT NULL`` on a NOT
#: NULL column).
_REAL_COLUMN = {"tool_search": " AND length(text_hash) >= 0"}


def guard_sqlite(dbapi_connection: sqlite3.Connection) -> None:
    """Any SQL tool connection: no ATTACH or DETACH (nor VACUUM INTO, an ATTACH)."""

    def authorize(action: int, *_: Any) -> int:
        return _DENY if action in _ATTACH else _OK

    dbapi_connection.set_authorizer(authorize)


def scope_sqlite(dbapi_connection: sqlite3.Connection, record: Any) -> None:
    """The registry connection: tenant views and the authorizer that enforces them."""
    slot: list[str | None] = [None]
    record.info[TENANT_SLOT] = slot
    dbapi_connection.create_function("tooldb_tenant", 0, lambda: slot[0])
    prefix = f"_tooldb_{secrets.token_hex(16)}_"
    inner = {f"{prefix}{table}" for table in SCOPES}
    for table, condition in SCOPES.items():
        where = condition.format(tenant="tooldb_tenant()", schema="main.")
        where += _REAL_COLUMN.get(table, "")
        dbapi_connection.execute(
            f'CREATE TEMP VIEW "{prefix}{table}" AS SELECT * FROM main.{table} WHERE {where}'
        )
        dbapi_connection.execute(f'CREATE TEMP VIEW {table} AS SELECT * FROM "{prefix}{table}"')
    # The first use of a table-valued function reads the schema: do it before the guard.
    dbapi_connection.execute("SELECT * FROM json_each('[]'), json_tree('[]')").fetchall()

    def authorize(
        action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action == sqlite3.SQLITE_READ:
            if db == "main" and arg1 in SCOPES and source in inner:
                return _OK  # the registry's table, from tooldb's tenant view
            if db == "temp" and (arg1 in SCOPES or (arg1 in inner and source in SCOPES)):
                return _OK  # the public view, or its inner view read from it
            # SQLite names no database for a table-valued function's read (3.4x)
            return _OK if arg1 in _TABLE_FUNCTIONS and db in ("main", None) else _DENY
        if action == sqlite3.SQLITE_FUNCTION:
            return _DENY if arg2 == "load_extension" else _OK
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return _OK
        if action == sqlite3.SQLITE_TRANSACTION:
            return _OK  # BEGIN/ROLLBACK: the executor's; a statement's commits nothing
        if action == sqlite3.SQLITE_PRAGMA and arg1 == "query_only":
            return _OK if (arg2 or "").lower() in _ON else _DENY
        return _DENY

    dbapi_connection.set_authorizer(authorize)


def set_sqlite_tenant(conn: sa.Connection, tenant: str | None) -> None:
    slot: list[str | None] = conn.connection.info[TENANT_SLOT]
    slot[0] = tenant


# -- PostgreSQL -----------------------------------------------------------------------------
def role_url(registry_url: str, override: str | None) -> str:
    """Where SQL tools over a PostgreSQL registry connect: ``override`` (the
    ``registry_sql_url`` setting) or the registry's URL as ``tooldb_sql``, no password."""
    if override:
        return override
    url = make_url(registry_url)
    # URL.set ignores password=None (it keeps the owner's): build the URL afresh
    return sa.engine.URL.create(
        url.drivername, SQL_ROLE, None, url.host, url.port, url.database, url.query
    ).render_as_string(hide_password=False)


_ROLE_CHECK = sa.text(
    "SELECT current_user,"
    " (SELECT bool_and(row_security_active(c.oid)) FROM pg_class c"
    "  WHERE c.oid IN (" + ", ".join(f"to_regclass('{t}')" for t in SCOPES) + ")),"
    " (SELECT count(*) FROM pg_class c"
    "  WHERE c.oid IN (" + ", ".join(f"to_regclass('{t}')" for t in SCOPES) + ")),"
    " pg_has_role('pg_execute_server_program', 'MEMBER')"
    " OR pg_has_role('pg_read_server_files', 'MEMBER')"
    " OR pg_has_role('pg_write_server_files', 'MEMBER')"
)


def check_role(dbapi_connection: Any) -> None:
    """Refuse a connection whose role could read past RLS or reach the server's files."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(_ROLE_CHECK.text)
        user, scoped, tables, files = cursor.fetchone()
    finally:
        cursor.close()
    dbapi_connection.rollback()
    bypass = not scoped or tables != len(SCOPES)
    if bypass or files:
        why = (
            "it can read past row-level security (a superuser, BYPASSRLS, the tables' owner, "
            "or a registry not upgraded by `tooldb init`)"
            if bypass
            else "it may run programs or read or write the server's files"
        )
        raise ExecutionError(
            f"SQL tools over the registry refuse to run as role {user!r}: {why}; they run "
            f"as {SQL_ROLE}, which `tooldb init` creates (see docs/sql.md)"
        )


def tenant_settings(secret: str, tenant: str) -> dict[str, str]:
    """The per-transaction settings (``SET LOCAL``) that scope a statement to ``tenant``."""
    return {TENANT_SETTING: tenant, MAC_SETTING: tenant_mac(secret, tenant)}
