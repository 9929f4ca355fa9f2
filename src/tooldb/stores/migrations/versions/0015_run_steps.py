"""Run steps: what a submitted run did that tooldb keeps for its resumption itself (its
calls' full results, the tools it learned from), so these need no DBOS step each.

Keyed by tenant, run and step (``call:TURN:TOOL:ARGS:N`` or ``learn:TOOL``): a row is
written in the transaction of the call's record (or of the evidence it learned), so a
resumed run finds it exactly when the call completed (workers/durable.py).

Revision ID: 0015_run_steps
Revises: 0014_skill_vectors
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_run_steps"
down_revision = "0014_skill_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_steps",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("step", sa.Text, primary_key=True),
        sa.Column("call_id", sa.BigInteger, nullable=True),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":  # SQL tools see their tenant's rows only
        op.execute("ALTER TABLE run_steps ENABLE ROW LEVEL SECURITY")
        op.execute(
            "CREATE POLICY tenant_rows ON run_steps FOR SELECT "
            "USING (tenant = (SELECT tooldb_sql_tenant()))"
        )


def downgrade() -> None:
    op.drop_table("run_steps")
