"""Built-in tools' tables: ``memories`` (remember/recall/forget) and ``run_plans``
(the plan tool), both tenant-owned; on PostgreSQL under the same row-level security
as the other tenant tables (migration 0006), so a SQL tool over the registry sees only
its caller's tenant's memories.

Revision ID: 0009_memory
Revises: 0008_selection_evidence
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009_memory"
down_revision = "0008_selection_evidence"
branch_labels = None
depends_on = None

_Json = sa.JSON().with_variant(JSONB(), "postgresql")
_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TENANT = "(SELECT tooldb_sql_tenant())"


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("tags", _Json, nullable=False),
        sa.Column("embedder", sa.Text, nullable=True),
        sa.Column("vector", sa.LargeBinary, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,  # ids never reused: recall's cache relies on it
    )
    op.create_index("ix_memories_tenant_namespace", "memories", ["tenant", "namespace"])
    op.create_table(
        "run_plans",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("steps", _Json, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        for table in ("memories", "run_plans"):
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(
                f"CREATE POLICY tenant_rows ON {table} FOR SELECT USING (tenant = {_TENANT})"
            )


def downgrade() -> None:
    op.drop_table("run_plans")
    op.drop_index("ix_memories_tenant_namespace", "memories")
    op.drop_table("memories")
