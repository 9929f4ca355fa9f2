"""Skills and agents get a lifecycle like tools (issue 28): an ``enabled`` flag with
the reason they were disabled (``--allow-missing`` registers one disabled, naming what
it lacks), every version of their definitions kept in ``catalog_versions`` (so
``tooldb show agent X --version 1`` works), and their assignments as rows: an agent's
skills (``agent_skills``) and a skill's tools (``skill_tools``), each with its position,
priority and configuration. Existing definitions become version and assignment rows.

Revision ID: 0013_catalog_lifecycle
Revises: 0010_api_keys
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013_catalog_lifecycle"
down_revision = "0010_api_keys"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_SKILL_FIELDS = ("name", "description", "instructions", "parent", "depends_on",
                 "optional_dependencies", "tools", "active", "metadata")  # fmt: skip


def upgrade() -> None:
    for table in ("skills", "agents"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true())
            )
            batch.add_column(sa.Column("disabled_reason", sa.Text, nullable=True))
    with op.batch_alter_table("skills") as batch:
        batch.add_column(
            sa.Column("optional_dependencies", Json, nullable=False, server_default=sa.text("'[]'"))
        )
    versions = op.create_table(
        "catalog_versions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("definition", Json, nullable=False),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("tenant", "kind", "name", "version", name="uq_catalog_versions"),
    )
    agent_skills = op.create_table(
        "agent_skills",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("agent", sa.Text, primary_key=True),
        sa.Column("skill", sa.Text, primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("config", Json, nullable=False),
    )
    skill_tools = op.create_table(
        "skill_tools",
        sa.Column("tenant", sa.Text, primary_key=True),
        sa.Column("skill", sa.Text, primary_key=True),
        sa.Column("tool", sa.Text, primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("access", sa.Text, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("config", Json, nullable=False),
    )
    op.create_index("ix_skill_tools_tool", "skill_tools", ["tenant", "tool"])
    bind = op.get_bind()
    links: dict[str, list[dict[str, Any]]] = {"agent_skills": [], "skill_tools": []}
    rows = []
    for row in bind.execute(sa.text("SELECT * FROM skills")).mappings():
        definition = {f: _loaded(row[f]) for f in _SKILL_FIELDS}
        rows.append(_version(row, "skill", definition))
        for position, grant in enumerate(definition["tools"] or []):
            links["skill_tools"].append({
                "tenant": row["tenant"], "skill": row["name"], "tool": grant["name"],
                "position": position, "access": grant.get("access", "execute"),
                "priority": 0, "config": {},
            })  # fmt: skip
    for row in bind.execute(sa.text("SELECT * FROM agents")).mappings():
        definition = _loaded(row["definition"])
        rows.append(_version(row, "agent", definition))
        for position, skill in enumerate(definition.get("skills") or []):
            links["agent_skills"].append({
                "tenant": row["tenant"], "agent": row["name"], "skill": skill,
                "position": position, "priority": 0, "config": {},
            })  # fmt: skip
    if rows:
        op.bulk_insert(versions, rows)
    for link_table, link_rows in ((agent_skills, links["agent_skills"]),
                                  (skill_tools, links["skill_tools"])):  # fmt: skip
        if link_rows:
            op.bulk_insert(link_table, link_rows)
    if bind.dialect.name == "postgresql":  # as every tenant-owned table (0006)
        for table_name in ("catalog_versions", "agent_skills", "skill_tools"):
            op.execute(f"ALTER TABLE {table_name} ENABLE ROW LEVEL SECURITY")
            op.execute(
                f"CREATE POLICY tenant_rows ON {table_name} FOR SELECT "
                "USING (tenant = (SELECT tooldb_sql_tenant()))"
            )


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def _version(row: sa.RowMapping, kind: str, definition: Any) -> dict[str, Any]:
    return {
        "tenant": row["tenant"], "kind": kind, "name": row["name"],
        "version": row["version"], "definition": definition,
        "content_hash": row["content_hash"], "created_at": row["updated_at"],
    }  # fmt: skip


def downgrade() -> None:
    op.drop_table("skill_tools")
    op.drop_table("agent_skills")
    op.drop_table("catalog_versions")
    with op.batch_alter_table("skills") as batch:
        batch.drop_column("optional_dependencies")
    for table in ("skills", "agents"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("disabled_reason")
            batch.drop_column("enabled")
