"""Run leases: who runs a run, and until when it is known alive.

A run's process renews ``lease_expires_at`` while the run is under way; a ``running``
run whose lease expired lost its process (killed, crashed, its machine gone) and is
marked ``interrupted`` by the next open or sweep. Runs left ``running`` by earlier
versions (which had no lease) get an expired one, so they are marked too.

Revision ID: 0007_run_leases
Revises: 0006_tenant_isolation
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_run_leases"
down_revision = "0006_tenant_isolation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("owner", sa.Text, nullable=True))
    op.add_column("runs", sa.Column("lease_expires_at", sa.Float, nullable=True))
    op.execute("UPDATE runs SET lease_expires_at = started_at WHERE status = 'running'")
    running = sa.text("status = 'running'")
    op.create_index(
        "ix_runs_running",
        "runs",
        ["tenant", "lease_expires_at"],
        sqlite_where=running,
        postgresql_where=running,
    )


def downgrade() -> None:
    op.drop_index("ix_runs_running", "runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
