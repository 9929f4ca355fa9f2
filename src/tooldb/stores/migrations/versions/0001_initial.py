"""Initial registry: tools, their versions, and the call log.

Revision ID: 0001_initial
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "tools",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("category", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("parameters", Json, nullable=False),
        sa.Column("returns", sa.Text, nullable=False),
        sa.Column("timeout_s", sa.Float, nullable=True),
        sa.Column("metadata", Json, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("usage_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("success_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("total_duration_ms", sa.Float, nullable=False, server_default="0"),
        sa.Column("last_used", sa.Float, nullable=True),
        sa.UniqueConstraint("tenant", "name", name="uq_tools_tenant_name"),
    )
    op.create_index("ix_tools_tenant_category", "tools", ["tenant", "category"])
    op.create_table(
        "tool_versions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "tool_id",
            BigId,
            sa.ForeignKey("tools.id", ondelete="CASCADE", name="fk_tool_versions_tool"),
            nullable=False,
        ),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("definition", Json, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("tool_id", "version", name="uq_tool_versions_tool_version"),
    )
    op.create_table(
        "calls",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("tool_id", sa.BigInteger, nullable=True),
        sa.Column("tool_name", sa.Text, nullable=False),
        sa.Column("tool_version", sa.Integer, nullable=False),
        sa.Column("run_id", sa.Text, nullable=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("arguments", sa.JSON, nullable=True),
        sa.Column("success", sa.Boolean, nullable=False),
        sa.Column("error_kind", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("output_size", sa.BigInteger, nullable=False),
        sa.Column("output_preview", sa.Text, nullable=True),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
    )
    op.create_index("ix_calls_tenant_started", "calls", ["tenant", "started_at"])
    op.create_index("ix_calls_tenant_tool_started", "calls", ["tenant", "tool_name", "started_at"])
    op.create_index("ix_calls_run", "calls", ["run_id"])


def downgrade() -> None:
    op.drop_table("calls")
    op.drop_table("tool_versions")
    op.drop_table("tools")
