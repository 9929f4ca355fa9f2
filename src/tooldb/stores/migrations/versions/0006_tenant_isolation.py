"""Tenant isolation of SQL tools over the registry (issue 20).

PostgreSQL: row-level security on every tenant-owned table, one policy each keeping
the rows of ``tooldb_sql_tenant()``: the tenant the transaction set (``SET LOCAL
tooldb.tenant``) if ``tooldb.tenant_mac`` proves tooldb set it (a SHA-256 MAC under
the secret in ``sql_tenant_key``, which only the owner can read); otherwise NULL,
and no rows. RLS is enabled, not forced: the owner (the registry's own store
operations) is unaffected. The role SQL tools run as is created after the migration
(``tooldb init``, stores/tenant_scope.py), as it needs CREATEROLE.

SQLite: only the key table (empty), so that both schemas match the declared one; the
SQLite side is enforced per connection by the SQL executor.

Revision ID: 0006_tenant_isolation
Revises: 0005_called_tools
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0006_tenant_isolation"
down_revision = "0005_called_tools"
branch_labels = None
depends_on = None

# Frozen here (a later change to the live list gets its own migration).
_DIRECT = (
    "tools", "tenant_state", "calls", "decisions", "runs", "skills", "agents",
    "tool_stats_history", "ooda_cycles", "ooda_acts", "ooda_locks",
)  # fmt: skip
_THROUGH = {
    "tool_search": ("tool_id", "tools"),
    "tool_versions": ("tool_id", "tools"),
    "run_messages": ("run_id", "runs"),
}
_TENANT = "(SELECT tooldb_sql_tenant())"


def upgrade() -> None:
    op.create_table(
        "sql_tenant_key",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("secret", sa.Text, nullable=False),
    )
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    schema = bind.execute(sa.text("SELECT current_schema()")).scalar()
    q = bind.dialect.identifier_preparer.quote(str(schema))
    bind.execute(
        sa.text("INSERT INTO sql_tenant_key (id, secret) VALUES (1, :s)"),
        {"s": secrets.token_hex(32)},
    )
    op.execute("REVOKE ALL ON sql_tenant_key FROM PUBLIC")
    op.execute(
        f"""
        CREATE FUNCTION {q}.tooldb_sql_tenant() RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, pg_temp
        AS $$
          SELECT current_setting('tooldb.tenant', true)
          FROM {q}.sql_tenant_key k
          WHERE k.id = 1
            AND current_setting('tooldb.tenant_mac', true) = encode(sha256(convert_to(
                  k.secret || ':' || current_setting('tooldb.tenant', true), 'UTF8')), 'hex')
        $$
        """
    )
    for table in _DIRECT:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY tenant_rows ON {table} FOR SELECT USING (tenant = {_TENANT})")
    for table, (column, parent) in _THROUGH.items():
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_rows ON {table} FOR SELECT USING ({column} IN "
            f"(SELECT id FROM {q}.{parent} WHERE tenant = {_TENANT}))"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in (*_DIRECT, *_THROUGH):
            op.execute(f"DROP POLICY IF EXISTS tenant_rows ON {table}")
            op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        op.execute("DROP FUNCTION IF EXISTS tooldb_sql_tenant()")
    op.drop_table("sql_tenant_key")
