"""Agents: runs and their messages, skills, agent definitions.

Revision ID: 0003_agents
Revises: 0002_selection
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003_agents"
down_revision = "0002_selection"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("parent_run_id", sa.Text, nullable=True),
        sa.Column("agent", sa.Text, nullable=True),
        sa.Column("mode", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=True),
        sa.Column("task", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("output", sa.Text, nullable=True),
        sa.Column("data", Json, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("requires_review", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("review_reason", sa.Text, nullable=True),
        sa.Column("iterations", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tool_calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("metadata", Json, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=True),
    )
    op.create_index("ix_runs_tenant_started", "runs", ["tenant", "started_at"])
    op.create_index("ix_runs_parent", "runs", ["parent_run_id"])
    op.create_table(
        "run_messages",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "run_id",
            sa.Text,
            sa.ForeignKey("runs.id", ondelete="CASCADE", name="fk_run_messages_run"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("iteration", sa.Integer, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("message", Json, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("run_id", "seq", name="uq_run_messages_run_seq"),
    )
    op.create_table(
        "skills",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("instructions", sa.Text, nullable=False),
        sa.Column("parent", sa.Text, nullable=True),
        sa.Column("depends_on", Json, nullable=False),
        sa.Column("tools", Json, nullable=False),
        sa.Column("metadata", Json, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.UniqueConstraint("tenant", "name", name="uq_skills_tenant_name"),
    )
    op.create_table(
        "agents",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("definition", Json, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.UniqueConstraint("tenant", "name", name="uq_agents_tenant_name"),
    )


def downgrade() -> None:
    op.drop_table("agents")
    op.drop_table("skills")
    op.drop_table("run_messages")
    op.drop_index("ix_runs_parent", "runs")
    op.drop_index("ix_runs_tenant_started", "runs")
    op.drop_table("runs")
