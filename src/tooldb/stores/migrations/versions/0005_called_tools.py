"""Called tools: a partial index of the tools with calls counted.

Selection reads the statistics of its ~60 pooled tools on every ``select``; most of
them were never called, so have no row to return. Looking each id up in the tools
table reads one page per tool (100,000 tools: ~150 µs); in this index, which holds only
the called tools, the never-called cost a probe of a few cached pages (~30 µs).

Revision ID: 0005_called_tools
Revises: 0004_ooda
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_called_tools"
down_revision = "0004_ooda"
branch_labels = None
depends_on = None


def upgrade() -> None:
    called = sa.text("usage_count != 0")
    op.create_index(
        "ix_tools_called", "tools", ["id"], sqlite_where=called, postgresql_where=called
    )


def downgrade() -> None:
    op.drop_index("ix_tools_called", "tools")
