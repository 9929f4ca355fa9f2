"""API keys of the HTTP server, and the indexes its dashboard reads by.

A key is shown once when created; the registry keeps only its SHA-256 (keys are 256
random bits, so a fast hash is as safe as a slow one) and a short prefix to name it.
Each key belongs to one tenant and has one scope: ``read`` < ``call`` < ``admin``.

The dashboard's review queue reads ``runs`` flagged ``requires_review`` newest first
(a partial index), and its tools table counts each tool's calls per day
(``ix_calls_tenant_tool_started`` already serves that).

Revision ID: 0010_api_keys
Revises: 0009_memory
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_api_keys"
down_revision = "0009_memory"
branch_labels = None
depends_on = None
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("prefix", sa.Text, nullable=False),
        sa.Column("key_hash", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float, nullable=True),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_index("ix_api_keys_hash", "api_keys", ["key_hash"], unique=True)
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant", "created_at"])
    review = sa.text("requires_review")
    op.create_index(
        "ix_runs_review",
        "runs",
        ["tenant", "started_at"],
        sqlite_where=review,
        postgresql_where=review,
    )
    op.create_index("ix_runs_tenant_status_started", "runs", ["tenant", "status", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_tenant_status_started", "runs")
    op.drop_index("ix_runs_review", "runs")
    op.drop_index("ix_api_keys_tenant", "api_keys")
    op.drop_index("ix_api_keys_hash", "api_keys")
    op.drop_table("api_keys")
