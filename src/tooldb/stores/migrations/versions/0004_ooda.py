"""OODA: windowed figures on tools, their time series, cycles, audited acts, a cycle lock.

Revision ID: 0004_ooda
Revises: 0003_agents
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004_ooda"
down_revision = "0003_agents"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_TOOL_COLUMNS = (
    ("analyzed_at", sa.Float),
    ("window_s", sa.Float),
    ("window_calls", sa.BigInteger),
    ("window_successes", sa.BigInteger),
    ("window_duration_ms", sa.Float),
    ("window_p50_ms", sa.Float),
    ("window_p95_ms", sa.Float),
    ("base_usage_count", sa.BigInteger),
    ("base_success_count", sa.BigInteger),
    ("base_duration_ms", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("tools") as batch:
        for name, kind in _TOOL_COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    op.create_table(
        "tool_stats_history",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("tool_id", sa.BigInteger, nullable=False),
        sa.Column("tool_name", sa.Text, nullable=False),
        sa.Column("cycle_id", sa.BigInteger, nullable=True),
        sa.Column("analyzed_at", sa.Float, nullable=False),
        sa.Column("window_s", sa.Float, nullable=False),
        sa.Column("calls", sa.BigInteger, nullable=False),
        sa.Column("successes", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("p50_ms", sa.Float, nullable=True),
        sa.Column("p95_ms", sa.Float, nullable=True),
    )
    op.create_index(
        "ix_tool_stats_history_tenant_tool",
        "tool_stats_history",
        ["tenant", "tool_id", "analyzed_at"],
    )
    op.create_table(
        "ooda_cycles",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=False),
        sa.Column("window_s", sa.Float, nullable=False),
        sa.Column("tools_analyzed", sa.Integer, nullable=False),
        sa.Column("calls_analyzed", sa.BigInteger, nullable=False),
        sa.Column("findings", Json, nullable=False),
        sa.Column("acts", sa.Integer, nullable=False),
        sa.Column("notes", Json, nullable=False),
    )
    op.create_index("ix_ooda_cycles_tenant_started", "ooda_cycles", ["tenant", "started_at"])
    op.create_table(
        "ooda_acts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("cycle_id", sa.BigInteger, nullable=True),
        sa.Column("tool_id", sa.BigInteger, nullable=False),
        sa.Column("tool_name", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("policy", sa.Text, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("evidence", Json, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("reverses", sa.BigInteger, nullable=True),
        sa.Column("undone_at", sa.Float, nullable=True),
        sa.Column("undone_by", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_ooda_acts_tenant_created", "ooda_acts", ["tenant", "created_at"])
    op.create_index("ix_ooda_acts_tenant_tool", "ooda_acts", ["tenant", "tool_id"])
    op.create_table(
        "ooda_locks",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ooda_locks")
    op.drop_index("ix_ooda_acts_tenant_tool", "ooda_acts")
    op.drop_index("ix_ooda_acts_tenant_created", "ooda_acts")
    op.drop_table("ooda_acts")
    op.drop_index("ix_ooda_cycles_tenant_started", "ooda_cycles")
    op.drop_table("ooda_cycles")
    op.drop_index("ix_tool_stats_history_tenant_tool", "tool_stats_history")
    op.drop_table("tool_stats_history")
    with op.batch_alter_table("tools") as batch:
        for name, _kind in reversed(_TOOL_COLUMNS):
            batch.drop_column(name)
