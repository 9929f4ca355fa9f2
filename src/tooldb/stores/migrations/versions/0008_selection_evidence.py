"""Selection evidence: the tasks each tool served or failed, embedded, per tenant.

Revision ID: 0008_selection_evidence
Revises: 0007_run_leases
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_selection_evidence"
down_revision = "0007_run_leases"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "task_evidence",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("task", sa.Text, nullable=False),
        sa.Column("embedder", sa.Text, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
        sa.Column("good", sa.Float, nullable=False),
        sa.Column("bad", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
    )
    op.create_index("ix_task_evidence_tenant_tool", "task_evidence", ["tenant", "tool"])
    op.create_table(
        "evidence_state",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    )
    if op.get_bind().dialect.name == "postgresql":  # SQL tools see their tenant's rows only
        for table in ("task_evidence", "evidence_state"):
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(
                f"CREATE POLICY tenant_rows ON {table} FOR SELECT "
                "USING (tenant = (SELECT tooldb_sql_tenant()))"
            )


def downgrade() -> None:
    op.drop_table("evidence_state")
    op.drop_index("ix_task_evidence_tenant_tool", "task_evidence")
    op.drop_table("task_evidence")
