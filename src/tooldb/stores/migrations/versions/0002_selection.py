"""Selection: per-tool search documents and embeddings, decisions, change tracking.

Revision ID: 0002_selection
Revises: 0001_initial
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002_selection"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("tools") as batch:
        batch.add_column(sa.Column("change_seq", sa.BigInteger, nullable=False, server_default="0"))
    op.create_index("ix_tools_tenant_change_seq", "tools", ["tenant", "change_seq"])
    op.create_table(
        "tenant_state",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("generation", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("removals", sa.BigInteger, nullable=False, server_default="0"),
    )
    op.create_table(
        "tool_search",
        sa.Column(
            "tool_id",
            BigId,
            sa.ForeignKey("tools.id", ondelete="CASCADE", name="fk_tool_search_tool"),
            primary_key=True,
        ),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("text_hash", sa.Text, nullable=False),
        sa.Column("embedder", sa.Text, nullable=True),
        sa.Column("dim", sa.Integer, nullable=True),
        sa.Column("vector", sa.LargeBinary, nullable=True),
        sa.Column("embedded_at", sa.Float, nullable=True),
    )
    op.create_index("ix_tool_search_embedder", "tool_search", ["embedder"])
    op.create_table(
        "decisions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("run_id", sa.Text, nullable=True),
        sa.Column("task", sa.Text, nullable=False),
        sa.Column("k", sa.Integer, nullable=False),
        sa.Column("filters", Json, nullable=False),
        sa.Column("candidates", Json, nullable=False),
        sa.Column("chosen", sa.Text, nullable=True),
        sa.Column("embedder", sa.Text, nullable=True),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_decisions_tenant_created", "decisions", ["tenant", "created_at"])
    op.create_index("ix_decisions_run", "decisions", ["run_id"])


def downgrade() -> None:
    op.drop_table("decisions")
    op.drop_table("tool_search")
    op.drop_table("tenant_state")
    op.drop_index("ix_tools_tenant_change_seq", "tools")
    with op.batch_alter_table("tools") as batch:
        batch.drop_column("change_seq")
