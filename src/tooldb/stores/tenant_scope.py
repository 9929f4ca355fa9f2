"""What a SQL tool over the registry may see: its own tenant's rows, nothing else.

The registry's tenant-owned tables, and how each row finds its tenant (a ``tenant``
column, or the tool or run it belongs to). Two enforcements are built from this list:

* PostgreSQL (migration 0006): row-level security on every table, a policy that keeps
  the rows of ``tooldb_sql_tenant()``; SQL tools connect as ``SQL_ROLE``, a role that
  owns nothing and cannot bypass RLS. The tenant is set per transaction (``SET
  LOCAL`` through ``set_config(..., true)``) together with a MAC of it under a secret
  the role cannot read (``sql_tenant_key``), so a statement that sets the tenant
  itself gets no rows at all.
* SQLite (executors/sql_tenancy.py): per-connection temporary views named like the
  tables, and an authorizer that lets a statement read the tables only through them.

The registry's own store operations run as the tables' owner, which RLS does not
apply to (RLS is enabled, not forced).
"""

from __future__ import annotations

import hashlib
import logging

import sqlalchemy as sa

#: The PostgreSQL role SQL tools over the registry run as (created by ``tooldb init``).
SQL_ROLE = "tooldb_sql"
#: The table holding the MAC secret (one row, id 1; PostgreSQL only fills it).
KEY_TABLE = "sql_tenant_key"
#: The function RLS policies call: the transaction's tenant if its MAC is right, else NULL.
TENANT_FUNCTION = "tooldb_sql_tenant"

#: table -> the condition keeping one tenant's rows, with ``{tenant}`` the tenant
#: expression and ``{schema}`` the schema qualifier of the registry's tables.
SCOPES: dict[str, str] = {
    "tools": "tenant = {tenant}",
    "tenant_state": "tenant = {tenant}",
    "tool_search": "tool_id IN (SELECT id FROM {schema}tools WHERE tenant = {tenant})",
    "tool_versions": "tool_id IN (SELECT id FROM {schema}tools WHERE tenant = {tenant})",
    "calls": "tenant = {tenant}",
    "decisions": "tenant = {tenant}",
    "runs": "tenant = {tenant}",
    "run_messages": "run_id IN (SELECT id FROM {schema}runs WHERE tenant = {tenant})",
    "skills": "tenant = {tenant}",
    "agents": "tenant = {tenant}",
    "tool_stats_history": "tenant = {tenant}",
    "ooda_cycles": "tenant = {tenant}",
    "ooda_acts": "tenant = {tenant}",
    "ooda_locks": "tenant = {tenant}",
    "memories": "tenant = {tenant}",
    "run_plans": "tenant = {tenant}",
    "catalog_versions": "tenant = {tenant}",
    "agent_skills": "tenant = {tenant}",
    "skill_tools": "tenant = {tenant}",
    "task_evidence": "tenant = {tenant}",
    "evidence_state": "tenant = {tenant}",
    "skill_vectors": "tenant = {tenant}",
    "run_steps": "tenant = {tenant}",
}

TENANT_SETTING = "tooldb.tenant"
MAC_SETTING = "tooldb.tenant_mac"

log = logging.getLogger(__name__)


def tenant_mac(secret: str, tenant: str) -> str:
    """The proof, checked by ``tooldb_sql_tenant()``, that tooldb set this tenant."""
    return hashlib.sha256(f"{secret}:{tenant}".encode()).hexdigest()


def read_secret(connection: sa.Connection) -> str:
    """The MAC secret, read as the owner (the SQL role has no privilege on the table)."""
    secret = connection.execute(sa.text(f"SELECT secret FROM {KEY_TABLE} WHERE id = 1")).scalar()
    if not secret:
        raise LookupError(f"the registry has no {KEY_TABLE} secret: run `tooldb init`")
    return str(secret)


def grant_sql_role(connection: sa.Connection, role: str = SQL_ROLE) -> str | None:
    """Create the SQL tools' role if missing and grant it SELECT on the tenant tables.

    Runs in the migration's transaction (under its lock). Creating the role is best
    effort: a registry owner without CREATEROLE keeps a working registry, and SQL
    tools over it fail closed until an administrator runs the statements of
    docs/sql.md. Returns why the role could not be created, or None.
    """
    preparer = connection.dialect.identifier_preparer
    quoted = preparer.quote(role)
    exists = connection.execute(
        sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}
    ).first()
    if exists is None:
        savepoint = connection.begin_nested()
        try:
            connection.exec_driver_sql(
                f"CREATE ROLE {quoted} LOGIN NOSUPERUSER NOINHERIT NOCREATEDB "
                "NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            )
            savepoint.commit()
        except sa.exc.DBAPIError as exc:  # no CREATEROLE, or a concurrent init made it
            savepoint.rollback()
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
            if "already exists" not in reason:
                log.warning("could not create the role %s for SQL tools: %s", role, reason)
                return reason
    schema = preparer.quote(str(connection.execute(sa.text("SELECT current_schema()")).scalar()))
    savepoint = connection.begin_nested()
    try:  # PUBLIC usually has USAGE on the schema already; only its owner may grant it
        connection.exec_driver_sql(f"GRANT USAGE ON SCHEMA {schema} TO {quoted}")
        savepoint.commit()
    except sa.exc.DBAPIError:
        savepoint.rollback()
    tables = ", ".join(f"{schema}.{table}" for table in SCOPES)
    connection.exec_driver_sql(f"GRANT SELECT ON {tables} TO {quoted}")
    return None
