"""Skills and agents get a lifecycle like tools (issue 28): an ``enabled`` flag with
the reason they were disabled (``--allow-missing`` registers one disabled, naming what
it lacks), and every version of their definitions kept in ``catalog_versions`` (so
``tooldb show agent X --version 1`` works). Existing definitions become version rows.

Revision ID: 0013_catalog_lifecycle
Revises: 0007_run_leases
"""

import json

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013_catalog_lifecycle"
down_revision = "0007_run_leases"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_SKILL_FIELDS = ("name", "description", "instructions", "parent", "depends_on", "tools",
                 "active", "metadata")  # fmt: skip


def upgrade() -> None:
    for table in ("skills", "agents"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true())
            )
            batch.add_column(sa.Column("disabled_reason", sa.Text, nullable=True))
    versions = op.create_table(
        "catalog_versions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("definition", Json, nullable=False),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("tenant", "kind", "name", "version", name="uq_catalog_versions"),
    )
    bind = op.get_bind()
    rows = []
    for row in bind.execute(sa.text("SELECT * FROM skills")).mappings():
        definition = {f: _loaded(row[f]) for f in _SKILL_FIELDS}
        rows.append(_version(row, "skill", definition))
    for row in bind.execute(sa.text("SELECT * FROM agents")).mappings():
        rows.append(_version(row, "agent", _loaded(row["definition"])))
    if rows:
        op.bulk_insert(versions, rows)
    if bind.dialect.name == "postgresql":  # as every tenant-owned table (0006)
        op.execute("ALTER TABLE catalog_versions ENABLE ROW LEVEL SECURITY")
        op.execute(
            "CREATE POLICY tenant_rows ON catalog_versions FOR SELECT "
            "USING (tenant = (SELECT tooldb_sql_tenant()))"
        )


def _loaded(value: object) -> object:
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def _version(row: sa.RowMapping, kind: str, definition: object) -> dict[str, object]:
    return {
        "tenant": row["tenant"], "kind": kind, "name": row["name"],
        "version": row["version"], "definition": definition,
        "content_hash": row["content_hash"], "created_at": row["updated_at"],
    }  # fmt: skip


def downgrade() -> None:
    op.drop_table("catalog_versions")
    for table in ("skills", "agents"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("disabled_reason")
            batch.drop_column("enabled")
