"""Skill vectors: each skill's embedding kept in the store, so a new process does not
embed every skill again on its first skill selection.

Keyed by tenant, embedder and the skill's content hash: a changed skill gets a new
vector, switching embedder never mixes spaces, and the vectors of skills no longer
stored are pruned when new ones are written (selection/skills.py).

Revision ID: 0014_skill_vectors
Revises: 0013_catalog_lifecycle
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_skill_vectors"
down_revision = "0013_catalog_lifecycle"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "skill_vectors",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("embedder", sa.Text, primary_key=True),
        sa.Column("content_hash", sa.Text, primary_key=True),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
        sa.Column("embedded_at", sa.Float, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":  # SQL tools see their tenant's rows only
        op.execute("ALTER TABLE skill_vectors ENABLE ROW LEVEL SECURITY")
        op.execute(
            "CREATE POLICY tenant_rows ON skill_vectors FOR SELECT "
            "USING (tenant = (SELECT tooldb_sql_tenant()))"
        )


def downgrade() -> None:
    op.drop_table("skill_vectors")
